"""Finding an agent's binary where reef's set-up puts it, not only on PATH: beside the Python running reef (the
virtual environment's bin, where dsh is installed and where scripts/setup links pi and codex) and in the checkout's
`.tools/node_modules/.bin` (where scripts/setup installs pi and codex with npm)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

CHECKOUT_AGENTS = Path(__file__).resolve().parents[1] / ".tools" / "node_modules" / ".bin"


def setup_folders() -> list[Path]:
    """The folders reef looks in after PATH, in order."""
    return [Path(os.path.abspath(sys.executable)).parent, CHECKOUT_AGENTS]


def find_agent(binary: str) -> str | None:
    """The path of `binary`: on PATH, else in one of `setup_folders()`; None when it is in none of them."""
    found = shutil.which(binary)
    if found is not None:
        return found
    return shutil.which(binary, path=os.pathsep.join(str(folder) for folder in setup_folders()))


def not_found(binary: str, package: str) -> str:
    """Why `binary` cannot be started, naming every place reef looked."""
    folders = ", ".join(str(folder) for folder in setup_folders())
    return (
        f"{binary} is not installed: reef looked on PATH and in {folders}; install it ({package}) or run scripts/setup"
    )
