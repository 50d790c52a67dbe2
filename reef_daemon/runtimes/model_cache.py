"""The user's folder of converted models, shared by every state directory (and light to import: no torch)."""

from __future__ import annotations

import os
from pathlib import Path


def user_model_cache() -> Path:
    """The converted models of this user: $XDG_CACHE_HOME/reef/models, else ~/.cache/reef/models."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "reef" / "models"
