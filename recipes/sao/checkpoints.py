"""Weight checkpoints in a git repository, the safetensors files tracked by git-lfs: one commit per checkpoint,
a rollback republishes an old checkpoint as a new commit (history is never rewritten).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from git import Git, GitCommandError
from safetensors.torch import load_file, save_file

WEIGHTS_FILE = "weights.safetensors"
MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True)
class Checkpoint:
    release_id: str
    manifest: dict[str, Any]


class CheckpointRepo:
    def __init__(self, root: Path) -> None:
        self.root = root

    def open(self) -> None:
        """Create the repository on first use; fail with the fix when git-lfs is missing."""
        if shutil.which("git-lfs") is None:
            raise RuntimeError("weight checkpoints need git-lfs: install it (apt-get install git-lfs)")
        if (self.root / ".git").is_dir():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self._git("init", "-q", "-b", "main")
        self._git("lfs", "install", "--local")
        (self.root / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
        self._git("add", ".gitattributes")
        self._commit("weight checkpoints of this scenario")

    def save(self, state: dict[str, torch.Tensor], manifest: dict[str, Any], message: str) -> str:
        """Commit a checkpoint; returns its release id (the commit)."""
        save_file({name: tensor.contiguous() for name, tensor in state.items()}, str(self.root / WEIGHTS_FILE))
        (self.root / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        self._git("add", WEIGHTS_FILE, MANIFEST_FILE)
        return self._commit(message)

    def latest(self) -> Checkpoint | None:
        if not (self.root / MANIFEST_FILE).is_file():
            return None
        return Checkpoint(self._git("rev-parse", "HEAD"), json.loads((self.root / MANIFEST_FILE).read_text()))

    def history(self) -> list[str]:
        """Every checkpoint's release id, oldest first."""
        listed = self._git("log", "--reverse", "--format=%H", "--", MANIFEST_FILE)
        return listed.split()

    def has(self, release_id: str) -> bool:
        if not release_id.isalnum():
            return False
        try:
            listed = self._git("ls-tree", "--name-only", release_id)
        except RuntimeError:
            return False
        return MANIFEST_FILE in listed.splitlines()

    def republish(self, release_id: str, message: str) -> str:
        """Make an old checkpoint current again, as a new commit."""
        self._git("checkout", release_id, "--", WEIGHTS_FILE, MANIFEST_FILE)
        return self._commit(message)

    def read(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The current checkpoint's tensors and manifest."""
        return load_file(str(self.root / WEIGHTS_FILE)), json.loads((self.root / MANIFEST_FILE).read_text())

    def _commit(self, message: str) -> str:
        self._git(
            "-c", "user.name=reef", "-c", "user.email=reef@localhost", "commit", "-q", "--allow-empty", "-m", message
        )
        return self._git("rev-parse", "HEAD")

    def _git(self, *args: str) -> str:
        try:
            output = Git(str(self.root)).execute(["git", *args], env=_ISOLATED)
        except GitCommandError as exc:
            detail = str(exc.stderr or exc.stdout or exc).strip()
            raise RuntimeError(f"git {args[0]} failed in {self.root}: {detail}") from None
        return str(output).strip()


# The user's own git settings (hooks, signing, templates) must not change what reef commits.
_ISOLATED = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null"}
