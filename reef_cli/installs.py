"""Which harness release is installed on this machine: the install script's record under the default root."""

from __future__ import annotations

import json
from pathlib import Path

# Where the install script puts a scenario's harness and records the release it installed.
INSTALL_ROOT = Path("~/reef-harness")
INSTALLED_FILE = ".reef-harness-release"


def installed_release(scenario: str) -> str | None:
    """The release the install script last installed for this scenario under ~/reef-harness, if any. The file is
    the install's JSON record; a bare release id (older installs) is read as it is."""
    path = INSTALL_ROOT.expanduser() / scenario / INSTALLED_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return text or None
    return str(record.get("release_id") or "") or None if isinstance(record, dict) else None
