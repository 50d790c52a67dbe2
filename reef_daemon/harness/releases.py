"""Harness releases: one line per scenario in the release store (`reef_daemon.releases`) at `releases.git`.

Each release holds the rendered tree for the deployment's adapter plus `reef-release.json`, the manifest (the
entries, the operation, the parent, the request). The scenario's first release is its base (v0).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_daemon.releases import ReleaseStore


@dataclass(frozen=True)
class Release:
    """One stored release: its id, the rendered files (the manifest apart) and the manifest."""

    release_id: str
    files: dict[str, str]
    manifest: dict[str, Any]


class ReleaseRepository:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._store = ReleaseStore(path)

    def close(self) -> None:
        self._store.close()

    def commit(self, scenario: str, files: dict[str, str], manifest: dict[str, Any], parent: str | None) -> str:
        """Store a release; returns its id. `parent` is the release it was built on (None for a scenario's first)."""
        encoded = {path: text.encode() for path, text in files.items()}
        return self._store.append(scenario, encoded, manifest, parent, _message(scenario, manifest))

    def republish(self, scenario: str, release_id: str, manifest: dict[str, Any], parent: str) -> str:
        """Store an earlier release's files again under a new manifest (a promote or a roll back)."""
        return self._store.republish(scenario, release_id, manifest, parent, _message(scenario, manifest))

    def read(self, scenario: str, release_id: str) -> Release | None:
        """The release with this id, if it is one of this scenario's."""
        release = self._store.read(scenario, release_id)
        if release is None:
            return None
        files = {path: data.decode("utf-8") for path, data in release.files.items()}
        return Release(release_id, files, release.manifest)

    def base(self, scenario: str) -> str | None:
        """The scenario's first release (its v0), if one was made."""
        return self._store.base(scenario)

    def create_base(self, scenario: str, files: dict[str, str], manifest: dict[str, Any]) -> str:
        """Store the scenario's first release; the existing base if there is one."""
        existing = self.base(scenario)
        if existing is not None:
            return existing
        return self.commit(scenario, files, manifest, None)


def _message(scenario: str, manifest: dict[str, Any]) -> str:
    return f"{manifest.get('operation', 'release')}: {manifest.get('summary', scenario)}"
