"""The release repository: a bare git repository under the state directory, one commit per harness release.

Each commit holds the rendered tree for the deployment's adapter plus `reef-release.json`, the manifest (the
entries, the operation, the parent, the request). `release_id` is the commit's SHA. Every release of a scenario
keeps a ref `refs/reef/<scenario as hex>/releases/<sha>`, so nothing is ever garbage-collected and a release id
is looked up only within its own scenario. History is never rewritten: promote and roll back add commits.

gitpython calls block, so callers run them in a thread; one lock serialises writers.
"""

from __future__ import annotations

import json
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
from git.index.fun import write_tree_from_cache
from git.index.typ import BaseIndexEntry, IndexEntry
from gitdb.base import IStream

MANIFEST = "reef-release.json"
_ACTOR = git.Actor("reef", "reef@localhost")
_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Release:
    """One stored release: its id, the rendered files (the manifest apart) and the manifest."""

    release_id: str
    files: dict[str, str]
    manifest: dict[str, Any]


class ReleaseRepository:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        if (path / "HEAD").exists():
            self._repo = git.Repo(path)
        else:
            path.mkdir(parents=True, exist_ok=True)
            self._repo = git.Repo.init(path, bare=True)

    def close(self) -> None:
        self._repo.close()

    def commit(self, scenario: str, files: dict[str, str], manifest: dict[str, Any], parent: str | None) -> str:
        """Store a release; returns its id. `parent` is the release it was built on (None for a scenario's first)."""
        content = {**files, MANIFEST: json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"}
        with self._lock:
            entries = []
            for path in sorted(content):
                data = content[path].encode()
                stored = self._repo.odb.store(IStream(b"blob", len(data), _BytesReader(data)))
                entries.append(IndexEntry.from_base(BaseIndexEntry((stat.S_IFREG | 0o644, stored.binsha, 0, path))))
            tree_sha, _ = write_tree_from_cache(entries, self._repo.odb, slice(0, len(entries)))
            tree = git.Tree(self._repo, tree_sha)
            parents = [self._repo.commit(parent)] if parent else []
            message = f"{manifest.get('operation', 'release')}: {manifest.get('summary', scenario)}"
            commit = git.Commit.create_from_tree(
                self._repo, tree, message, parent_commits=parents, author=_ACTOR, committer=_ACTOR
            )
            git.Reference.create(self._repo, self._ref(scenario, commit.hexsha), commit.hexsha, force=True)
            return str(commit.hexsha)

    def read(self, scenario: str, release_id: str) -> Release | None:
        """The release with this id, if it is one of this scenario's."""
        if not _SHA.fullmatch(release_id):
            return None
        with self._lock:
            try:
                commit = git.Reference(self._repo, self._ref(scenario, release_id)).commit
            except ValueError:
                return None
            files = {
                str(blob.path): blob.data_stream.read().decode("utf-8")
                for blob in commit.tree.traverse()
                if isinstance(blob, git.Blob)
            }
        manifest = json.loads(files.pop(MANIFEST))
        return Release(release_id, files, manifest)

    def base(self, scenario: str) -> str | None:
        """The scenario's first release (its v0), if one was made."""
        with self._lock:
            try:
                return str(git.Reference(self._repo, f"refs/reef/{_key(scenario)}/base").commit.hexsha)
            except ValueError:
                return None

    def create_base(self, scenario: str, files: dict[str, str], manifest: dict[str, Any]) -> str:
        """Store the scenario's first release and remember it as the base; the existing base if there is one."""
        existing = self.base(scenario)
        if existing is not None:
            return existing
        release_id = self.commit(scenario, files, manifest, None)
        with self._lock:
            git.Reference.create(self._repo, f"refs/reef/{_key(scenario)}/base", release_id, force=True)
        return release_id

    @staticmethod
    def _ref(scenario: str, release_id: str) -> str:
        return f"refs/reef/{_key(scenario)}/releases/{release_id}"


def _key(scenario: str) -> str:
    # Scenario names may hold '.', which git refuses in some positions ("a..b", "x.lock"): hex is always valid.
    return scenario.encode().hex()


class _BytesReader:
    """The minimal stream gitdb reads a blob from."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._offset = 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._offset + size
        chunk = self._data[self._offset : end]
        self._offset += len(chunk)
        return chunk
