"""What an install writes: the release's tree rendered for the adapter with reef's own entries and the model
binding, its checksum, and the sidecar that records the install.

The checksum frames each file as `path \\n length \\n bytes`, in path order, so no two different sets of files share
the framed text; the install script recomputes it with printf, wc and cat.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from adapters import Adapter, RenderRefused
from adapters._agent import Binding, checked_digest
from reef_daemon.errors import BadRequest
from reef_daemon.harness.tree import Entry

SIDECAR = ".reef-harness-release"
# Paths reach a shell script unquoted in loops: keep them to characters that need no quoting.
_PATH = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")


@dataclass(frozen=True)
class InstallFiles:
    """The files of one install, their checksum, and the sidecar text the script writes beside them."""

    files: dict[str, str]
    checksum: str
    sidecar: str


def install_files(adapter: Adapter, entries: list[Entry], binding: Binding, version: str) -> InstallFiles:
    """Render, bind and check an install; BadRequest when the tree cannot become this adapter's files."""
    try:
        rendered = adapter.render([*entries, *adapter.agent.reef_entries])
    except RenderRefused as exc:
        raise BadRequest(f"this release cannot be installed for {adapter.name}: {exc}", type="render_refused") from None
    files = adapter.agent.bind(rendered, binding)
    for path, text in files.items():
        if not _PATH.fullmatch(path) or any(part in (".", "..") for part in path.split("/")):
            raise BadRequest(f"the release holds a file path reef will not install: {path[:200]!r}", type="bad_path")
        if "\0" in text:
            raise BadRequest(f"the release file {path} holds a NUL character", type="bad_file")
    checksum = framed_checksum(files)
    digests = {
        path: checked_digest(text.encode(), adapter.agent.state_keys.get(path)) for path, text in sorted(files.items())
    }
    sidecar = {
        "adapter": adapter.name,
        "checksum": checksum,
        "files": digests,
        "model": binding.model,
        "release_id": binding.release_id,
        "scenario": binding.scenario,
        "url": binding.url,
        "version": version,
    }
    return InstallFiles(files, checksum, json.dumps(sidecar, indent=2, sort_keys=True))


def framed_checksum(files: dict[str, str]) -> str:
    """SHA-256 over `path\\n<byte length>\\n<bytes>` for every file, in path order."""
    digest = hashlib.sha256()
    for path in sorted(files):
        data = files[path].encode()
        digest.update(f"{path}\n{len(data)}\n".encode())
        digest.update(data)
    return digest.hexdigest()
