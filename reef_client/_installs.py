"""Installing a harness on this machine with the daemon's install script, and which release is installed: the
script's record under the default root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reef_daemon.contract import INSTALL_SIDECAR, PYTHON_ENV, TOKEN_ENV, ReleaseRow

# Where the install script puts a scenario's harness and records the release it installed.
INSTALL_ROOT = Path("~/reef-harness")


class ShownRelease(ReleaseRow):
    """A release row as `reef versions` and the TUI show it: marked when it is the one installed here."""

    installed: bool


def mark_installed(scenario: str, rows: list[ReleaseRow]) -> list[ShownRelease]:
    """The rows, each marked whether the install script last installed it for this scenario."""
    installed = installed_release(scenario)
    return [{**row, "installed": installed is not None and row["release_id"] == installed} for row in rows]


def installed_release(scenario: str) -> str | None:
    """The release the install script last installed for this scenario under ~/reef-harness, if any. The file is
    the install's JSON record; a bare release id (older installs) is read as it is."""
    path = INSTALL_ROOT.expanduser() / scenario / INSTALL_SIDECAR
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return text or None
    return str(record.get("release_id") or "") or None if isinstance(record, dict) else None


def run_install_script(
    script: str, token: str | None, root: Path | None = None, *, capture: bool = False, timeout_s: float | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the install script with `sh`, as `curl .../reef/harness/install | sh -s -- [ROOT]` would: the wrapper
    runs on this interpreter, and the token (if any) is handed to the script to save for the wrapper."""
    env = {**os.environ, PYTHON_ENV: sys.executable}
    env.pop(TOKEN_ENV, None)
    if token:
        env[TOKEN_ENV] = token
    args = [str(root.expanduser().absolute())] if root is not None else []
    return subprocess.run(
        ["sh", "-s", "--", *args],
        input=script,
        text=True,
        env=env,
        capture_output=capture,
        timeout=timeout_s,
        check=False,
    )
