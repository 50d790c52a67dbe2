"""An install on this machine, read from its root: the sidecar the install script wrote and the saved token."""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters import Adapter, Binding, checked_digest, get_adapter
from reef_contract import CANARY_DIR, INSTALL_SIDECAR, TOKEN_ENV

ROOT_ENV = "REEF_HARNESS_ROOT"
TOKEN_FILE = ".reef-token"  # noqa: S105 - a file name
NOT_INSTALLED = " (not installed by reef)"
CANARY_PREFIX = f"{CANARY_DIR}/"


class NotInstalled(Exception):
    """The root holds no readable install; the message says how to make one."""


@dataclass(frozen=True)
class Installed:
    root: Path
    adapter: Adapter
    sidecar: dict[str, Any]
    token: str | None

    @property
    def binding(self) -> Binding:
        s = self.sidecar
        return Binding(str(s["url"]), str(s["scenario"]), str(s["model"]), str(s["release_id"]))

    @property
    def wrapper(self) -> str:
        return f"reef-{self.adapter.name}"

    @property
    def canary(self) -> Installed | None:
        """The canary's tree installed beside this one (under CANARY_DIR), as an install of its own; None when the
        install holds no canary."""
        s = self.sidecar
        if not s.get("canary_release_id"):
            return None
        files = {
            path.removeprefix(CANARY_PREFIX): digest
            for path, digest in s["files"].items()
            if path.startswith(CANARY_PREFIX)
        }
        sidecar = {**s, "release_id": s["canary_release_id"], "version": s["canary_version"], "files": files}
        return Installed(self.root / CANARY_DIR, self.adapter, sidecar, self.token)

    def changed_files(self) -> list[str]:
        """Installed files whose content differs from what the install wrote (the agent's own state aside), then
        the files the install did not write where the agent loads instructions, code or settings from."""
        changed = []
        for path, expected in sorted(self.sidecar["files"].items()):
            try:
                data = (self.root / path).read_bytes()
            except OSError:
                changed.append(f"{path} (missing)")
                continue
            if checked_digest(data, self.adapter.agent.state_keys.get(path.removeprefix(CANARY_PREFIX))) != expected:
                changed.append(path)
        return changed + [path + NOT_INSTALLED for path in self._added_files()]

    def _added_files(self) -> list[str]:
        agent = self.adapter.agent
        installed = self.sidecar["files"]
        found = sorted({path for place in agent.loaded for path in _files_at(self.root, place)})
        return [
            path
            for path in found
            if path not in installed and not any(fnmatch.fnmatchcase(path, own) for own in agent.own_files)
        ]


def _files_at(root: Path, place: str) -> list[str]:
    """The file at `place` (relative to `root`), or every file and link under the folder there, as relative paths.
    A link to a folder counts as a file: the agent would follow it."""
    target = root / place
    if not target.is_dir() or target.is_symlink():
        return [place] if target.is_symlink() or target.exists() else []
    found = []
    for folder, subfolders, files in os.walk(target):
        links = [name for name in subfolders if os.path.islink(os.path.join(folder, name))]
        for name in [*files, *links]:
            found.append(Path(folder, name).relative_to(root).as_posix())
    return found


def load(adapter_name: str, environ: dict[str, str] | None = None) -> Installed:
    """The install the stub points at (`REEF_HARNESS_ROOT`); the token saved there, else `REEF_TOKEN`."""
    env = dict(os.environ if environ is None else environ)
    adapter = get_adapter(adapter_name)
    root_text = env.get(ROOT_ENV, "").strip()
    if not root_text:
        raise NotInstalled(f"{ROOT_ENV} is unset; run reef-{adapter.name} as the install script wrote it")
    root = Path(root_text)
    try:
        sidecar = json.loads((root / INSTALL_SIDECAR).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise NotInstalled(
            f"{root} holds no readable install record ({INSTALL_SIDECAR}); run the install script again"
        ) from None
    if sidecar.get("adapter") != adapter.name:
        raise NotInstalled(f"{root} holds a {sidecar.get('adapter')} install, not one for {adapter.name}")
    try:
        token = (root / TOKEN_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        token = None
    return Installed(root, adapter, sidecar, token or env.get(TOKEN_ENV) or None)
