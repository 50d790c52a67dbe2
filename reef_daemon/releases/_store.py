"""A versioned, append-only release history in git: one commit per release, large files kept by git-lfs.

A repository holds lines (a scenario's releases). A release is a commit whose tree holds its files and its manifest
(a JSON file); its id is the commit's SHA and its parent is the release it was built on. Every release keeps a ref
`refs/reef/<line as hex>/releases/<sha>`, so nothing is ever garbage-collected and an id is looked up only within
its own line; a line's first release is also its base, `refs/reef/<line as hex>/base`. History is never rewritten:
a promote or a rollback is a new commit (`republish`) with the files of an earlier release.

Commits go straight into the object database (no work tree, no index). gitpython calls block, so callers run them
in a thread; one lock per repository serialises them.
"""

from __future__ import annotations

import json
import re
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
from git.index.fun import write_tree_from_cache
from git.index.typ import BaseIndexEntry, IndexEntry
from gitdb.base import IStream

from reef_daemon.releases._errors import ReleaseStoreError
from reef_daemon.releases._lfs import ATTRIBUTES, ISOLATED, LargeFiles

MANIFEST = "reef-release.json"
_ACTOR = git.Actor("reef", "reef@localhost")
_SHA = re.compile(r"[0-9a-f]{40}")
_FILE_MODE = stat.S_IFREG | 0o644


@dataclass(frozen=True)
class Release:
    """One stored release: its id, its files (large ones with their content, the manifest apart) and its manifest."""

    release_id: str
    files: dict[str, bytes]
    manifest: dict[str, Any]


class ReleaseStore:
    """The release lines of one git repository: bare at `path`, or the `.git` of a work tree already at `path`."""

    def __init__(self, path: Path, *, manifest: str = MANIFEST, large_files: tuple[str, ...] = ()) -> None:
        """Open the repository, creating a bare one on first use.

        Args:
            path: the repository's folder.
            manifest: the name the manifest has in each release's tree.
            large_files: patterns (as in `.gitattributes`) of files kept by git-lfs instead of in git's objects.
        """
        self.path = path
        self.manifest_name = manifest
        self._lock = threading.Lock()
        if (path / ".git").exists() or (path / "HEAD").exists():
            self._repo = git.Repo(path)
        else:
            path.mkdir(parents=True, exist_ok=True)
            self._repo = git.Repo.init(path, bare=True)
        self._large = LargeFiles(Path(self._repo.git_dir), large_files) if large_files else None

    def close(self) -> None:
        """Stop git's helper processes, after the call in flight (if any) has finished with them."""
        with self._lock:
            self._repo.close()

    def append(
        self, line: str, files: Mapping[str, bytes], manifest: Mapping[str, Any], parent: str | None, message: str
    ) -> str:
        """Store a release built on `parent` (None for a line's first); returns its id."""
        with self._lock:
            entries = [self._entry(path, self._stored_file(path, data)) for path, data in files.items()]
            if self._large is not None:
                entries.append(self._entry(ATTRIBUTES, self._blob(self._large.attributes())))
            entries.append(self._entry(self.manifest_name, self._blob(_dump(manifest))))
            return self._commit(line, entries, parent, message)

    def republish(self, line: str, release_id: str, manifest: Mapping[str, Any], parent: str, message: str) -> str:
        """Store the files of an earlier release again, with a new manifest, as a new release built on `parent`."""
        with self._lock:
            source = self._member(line, release_id)
            if source is None:
                raise ReleaseStoreError(f"no release '{release_id[:64]}' in '{line}'")
            entries = [
                self._entry(str(item.path), item.binsha, item.mode)
                for item in source.tree.traverse()
                if isinstance(item, git.Blob) and item.path != self.manifest_name
            ]
            entries.append(self._entry(self.manifest_name, self._blob(_dump(manifest))))
            return self._commit(line, entries, parent, message)

    def read(self, line: str, release_id: str) -> Release | None:
        """The release with this id, if it is one of this line's; large files come back with their content."""
        with self._lock:
            commit = self._member(line, release_id)
            if commit is None:
                return None
            files: dict[str, bytes] = {}
            manifest: dict[str, Any] = {}
            for item in commit.tree.traverse():
                if not isinstance(item, git.Blob):
                    continue
                path, data = str(item.path), item.data_stream.read()
                if path == self.manifest_name:
                    manifest = json.loads(data)
                elif self._large is not None and path == ATTRIBUTES:
                    continue
                elif self._large is not None and self._large.matches(path):
                    files[path] = self._large.smudge(path, data)
                else:
                    files[path] = data
        return Release(release_id, files, manifest)

    def manifest(self, line: str, release_id: str) -> dict[str, Any] | None:
        """The manifest of this line's release, without reading its files; None when it is not one."""
        with self._lock:
            commit = self._member(line, release_id)
            if commit is None:
                return None
            try:
                blob = commit.tree / self.manifest_name
            except KeyError:
                return None
            loaded: dict[str, Any] = json.loads(blob.data_stream.read())
            return loaded

    def base(self, line: str) -> str | None:
        """The line's first release, if it has one."""
        with self._lock:
            return self._base(line)

    def history(self, line: str) -> list[str]:
        """Every release of the line, oldest first (a release always after the one it was built on)."""
        prefix = f"refs/reef/{_key(line)}/releases"
        with self._lock:
            members = {ref.path.rsplit("/", 1)[1] for ref in git.Reference.iter_items(self._repo, common_path=prefix)}
            if not members:
                return []
            listed = self._repo.git.rev_list("--topo-order", "--reverse", f"--glob={prefix}/*", env=ISOLATED)
        return [sha for sha in str(listed).split() if sha in members]

    def adopt(self, line: str, ref: str) -> list[str]:
        """Make the commits on `ref` that hold a manifest (first parents, oldest first) releases of the line.

        For a history written before the store kept lines; returns the ids adopted (none when `ref` does not exist).
        """
        with self._lock:
            try:
                tip = self._repo.commit(ref)
            except (git.BadName, ValueError):
                return []
            first_parents = [tip, *tip.iter_parents(first_parent=True)]
            chain = [commit for commit in reversed(first_parents) if _holds(commit, self.manifest_name)]
            for commit in chain:
                git.Reference.create(self._repo, _release_ref(line, commit.hexsha), commit.hexsha, force=True)
            if chain and self._base(line) is None:
                git.Reference.create(self._repo, _base_ref(line), chain[0].hexsha, force=True)
            return [commit.hexsha for commit in chain]

    def _stored_file(self, path: str, data: bytes) -> bytes:
        if path in (self.manifest_name, ATTRIBUTES):
            raise ReleaseStoreError(f"a release cannot hold a file named {path}: the store writes it")
        if self._large is not None and self._large.matches(path):
            return self._blob(self._large.clean(path, data))
        return self._blob(data)

    def _blob(self, data: bytes) -> bytes:
        return bytes(self._repo.odb.store(IStream(b"blob", len(data), _BytesReader(data))).binsha)

    @staticmethod
    def _entry(path: str, binsha: bytes, mode: int = _FILE_MODE) -> IndexEntry:
        return IndexEntry.from_base(BaseIndexEntry((mode, binsha, 0, path)))

    def _commit(self, line: str, entries: list[IndexEntry], parent: str | None, message: str) -> str:
        entries.sort(key=lambda entry: str(entry.path).encode())
        tree_sha, _ = write_tree_from_cache(entries, self._repo.odb, slice(0, len(entries)))
        parents = [self._repo.commit(parent)] if parent else []
        commit = git.Commit.create_from_tree(
            self._repo,
            git.Tree(self._repo, tree_sha),
            message,
            parent_commits=parents,
            author=_ACTOR,
            committer=_ACTOR,
        )
        git.Reference.create(self._repo, _release_ref(line, commit.hexsha), commit.hexsha, force=True)
        if self._base(line) is None:
            git.Reference.create(self._repo, _base_ref(line), commit.hexsha, force=True)
        return str(commit.hexsha)

    def _member(self, line: str, release_id: str) -> git.Commit | None:
        if not _SHA.fullmatch(release_id):
            return None
        try:
            return git.Reference(self._repo, _release_ref(line, release_id)).commit
        except ValueError:
            return None

    def _base(self, line: str) -> str | None:
        try:
            return str(git.Reference(self._repo, _base_ref(line)).commit.hexsha)
        except ValueError:
            return None


def _key(line: str) -> str:
    # Line names may hold '.', which git refuses in some positions ("a..b", "x.lock"): hex is always valid.
    return line.encode().hex()


def _release_ref(line: str, release_id: str) -> str:
    return f"refs/reef/{_key(line)}/releases/{release_id}"


def _base_ref(line: str) -> str:
    return f"refs/reef/{_key(line)}/base"


def _holds(commit: git.Commit, name: str) -> bool:
    return any(item.name == name for item in commit.tree.blobs)


def _dump(manifest: Mapping[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


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
