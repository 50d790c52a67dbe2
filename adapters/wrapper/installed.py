"""An install on this machine, read from its root: the sidecar the install script wrote and the saved token."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters import Adapter, get_adapter
from adapters._agent import Binding, checked_digest
from reef_daemon.contract import INSTALL_SIDECAR, TOKEN_ENV

ROOT_ENV = "REEF_HARNESS_ROOT"
TOKEN_FILE = ".reef-token"  # noqa: S105 - a file name


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

    def changed_files(self) -> list[str]:
        """Installed files whose content differs from what the install wrote (the agent's own state aside)."""
        changed = []
        for path, expected in sorted(self.sidecar["files"].items()):
            try:
                data = (self.root / path).read_bytes()
            except OSError:
                changed.append(f"{path} (missing)")
                continue
            if checked_digest(data, self.adapter.agent.state_keys.get(path)) != expected:
                changed.append(path)
        return changed


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
