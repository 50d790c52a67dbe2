"""Large files of a release, kept by git-lfs: the tree holds a pointer and the content lives in the repository's
`lfs/objects`, just as `git add` through the lfs filter leaves them, so git-lfs itself reads the repository.
"""

from __future__ import annotations

import os
import subprocess
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from reef_daemon.releases._errors import ReleaseStoreError

ATTRIBUTES = ".gitattributes"

# The user's own git settings (hooks, signing, templates) must not change what reef stores.
ISOLATED = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null"}


class LargeFiles:
    def __init__(self, git_dir: Path, patterns: tuple[str, ...]) -> None:
        self.git_dir = git_dir
        self.patterns = patterns

    def attributes(self) -> bytes:
        """The `.gitattributes` that routes these patterns through git-lfs (for anyone checking the tree out)."""
        return "".join(f"{pattern} filter=lfs diff=lfs merge=lfs -text\n" for pattern in self.patterns).encode()

    def matches(self, path: str) -> bool:
        name = PurePosixPath(path).name
        return any(fnmatchcase(path if "/" in pattern else name, pattern) for pattern in self.patterns)

    def clean(self, path: str, data: bytes) -> bytes:
        """Store `data` as an lfs object; returns the pointer the tree keeps in its place."""
        return self._lfs("clean", path, data)

    def smudge(self, path: str, pointer: bytes) -> bytes:
        """The content a pointer stands for."""
        return self._lfs("smudge", path, pointer)

    def _lfs(self, command: str, path: str, stdin: bytes) -> bytes:
        env = {**os.environ, **ISOLATED, "GIT_DIR": str(self.git_dir)}
        try:
            done = subprocess.run(
                ["git", "lfs", command, "--", path], input=stdin, capture_output=True, env=env, cwd=self.git_dir
            )
        except FileNotFoundError:
            raise ReleaseStoreError("large release files need git-lfs: install it (apt-get install git-lfs)") from None
        if done.returncode != 0:
            detail = done.stderr.decode(errors="replace").strip()
            raise ReleaseStoreError(f"git lfs {command} failed for {path} in {self.git_dir}: {detail}")
        return done.stdout
