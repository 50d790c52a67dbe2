"""Installing a harness on this machine with the daemon's install script, and which release is installed: the
script's record under the default root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reef_contract import INSTALL_SIDECAR, PYTHON_ENV, TOKEN_ENV, ReleaseRow

# Where the install script puts a scenario's harnesses (one root per adapter, <scenario>/<adapter>) and records the
# release each one installed.
INSTALL_ROOT = Path("~/reef-harness")
# How the install script's refusals name the way to give another root, when `reef install` runs it.
ROOT_HOW_ENV = "REEF_INSTALL_ROOT_HOW"


class ShownRelease(ReleaseRow):
    """A release row as `reef versions` and the TUI show it: marked when it is one installed here."""

    installed: bool


def mark_installed(scenario: str, rows: list[ReleaseRow]) -> list[ShownRelease]:
    """The rows, each marked whether the install script last installed it for this scenario, for any adapter."""
    installed = installed_releases(scenario)
    return [{**row, "installed": row["release_id"] in installed} for row in rows]


def installed_releases(scenario: str) -> set[str]:
    """The releases the install script last installed for this scenario under ~/reef-harness: one per adapter's
    root, and the scenario's folder itself where an older install made it the root of its one adapter."""
    folder = INSTALL_ROOT.expanduser() / scenario
    found = {_installed_in(root) for root in [folder, *sorted(folder.glob("*/"))]}
    return {release for release in found if release}


def _installed_in(root: Path) -> str | None:
    """The release the install record in `root` names. The file is the install's JSON record; a bare release id
    (older installs) is read as it is."""
    try:
        text = (root / INSTALL_SIDECAR).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return text or None
    return str(record.get("release_id") or "") or None if isinstance(record, dict) else None


def run_install_script(
    script: str,
    token: str | None,
    root: Path | None = None,
    *,
    root_how: str | None = None,
    capture: bool = False,
    timeout_s: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the install script with `sh`, as `curl .../reef/harness/install | sh -s -- [ROOT]` would: the wrapper
    runs on this interpreter, and the token (if any) is handed to the script to save for the wrapper. `root_how`
    is how a refusal should say to give another root (`with --root`), where that is not the script's argument."""
    env = {**os.environ, PYTHON_ENV: sys.executable}
    env.pop(ROOT_HOW_ENV, None)
    if root_how:
        env[ROOT_HOW_ENV] = root_how
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
