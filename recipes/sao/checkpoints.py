"""Weight checkpoints of one scenario: a line of the release store (`reef_daemon.releases`) in
`checkpoints/<scenario>`, the safetensors file kept by git-lfs. One commit per checkpoint, each built on the one
before; a rollback republishes an old checkpoint as a new commit (history is never rewritten).

A repository written before the store kept lines (checkpoints committed on `main` in a work tree) is taken over as
it is on first open: its commits stay the checkpoints' release ids.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load, save

from reef_daemon.recipe_api import ReleaseStore

WEIGHTS_FILE = "weights.safetensors"
MANIFEST_FILE = "manifest.json"
_EARLIER_HISTORY = "refs/heads/main"


@dataclass(frozen=True)
class Checkpoint:
    release_id: str
    manifest: dict[str, Any]


class CheckpointRepo:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._line = root.name
        self._opened: ReleaseStore | None = None

    def open(self) -> None:
        """Open the repository (creating it on first use); fail with the fix when git-lfs is missing."""
        if shutil.which("git-lfs") is None:
            raise RuntimeError("weight checkpoints need git-lfs: install it (apt-get install git-lfs)")
        store = ReleaseStore(self.root, manifest=MANIFEST_FILE, large_files=("*.safetensors",))
        if not store.history(self._line):
            store.adopt(self._line, _EARLIER_HISTORY)
        self._opened = store

    def save(self, state: dict[str, torch.Tensor], manifest: dict[str, Any], message: str) -> str:
        """Commit a checkpoint; returns its release id (the commit)."""
        weights = save({name: tensor.contiguous() for name, tensor in state.items()})
        return self._store.append(self._line, {WEIGHTS_FILE: weights}, manifest, self._last(), message)

    def latest(self) -> Checkpoint | None:
        release_id = self._last()
        if release_id is None:
            return None
        return Checkpoint(release_id, self._manifest(release_id))

    def history(self) -> list[str]:
        """Every checkpoint's release id, oldest first."""
        return self._store.history(self._line)

    def has(self, release_id: str) -> bool:
        return self._store.manifest(self._line, release_id) is not None

    def republish(self, release_id: str, message: str) -> str:
        """Make an old checkpoint current again, as a new commit."""
        manifest = self._manifest(release_id)
        parent = self._last()
        assert parent is not None  # the line holds release_id
        return self._store.republish(self._line, release_id, manifest, parent, message)

    def read(self, release_id: str | None = None) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """A checkpoint's tensors and manifest: the current one's by default."""
        wanted = release_id or self._last()
        release = self._store.read(self._line, wanted) if wanted else None
        if release is None:
            raise RuntimeError(f"no weight checkpoint {wanted or ''} in {self.root}")
        return load(release.files[WEIGHTS_FILE]), release.manifest

    @property
    def _store(self) -> ReleaseStore:
        if self._opened is None:
            raise RuntimeError("the checkpoint repository is not open")
        return self._opened

    def _last(self) -> str | None:
        history = self.history()
        return history[-1] if history else None

    def _manifest(self, release_id: str) -> dict[str, Any]:
        manifest = self._store.manifest(self._line, release_id)
        if manifest is None:
            raise RuntimeError(f"{release_id} is not a weight checkpoint in {self.root}")
        return manifest
