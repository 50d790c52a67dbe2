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

from adapters import Adapter, Binding, RenderRefused, checked_digest
from reef_contract import CANARY_DIR
from reef_daemon.errors import BadRequest
from reef_harness import Entry

# Paths reach a shell script unquoted in loops: keep them to characters that need no quoting.
_PATH = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")
CANARY_PREFIX = f"{CANARY_DIR}/"


@dataclass(frozen=True)
class InstallFiles:
    """The files of one install, their checksum, and the sidecar text the script writes beside them."""

    files: dict[str, str]
    checksum: str
    sidecar: str


def bound_files(adapter: Adapter, entries: list[Entry], binding: Binding) -> dict[str, str]:
    """The files an install writes for a tree: rendered with reef's own entries, then bound. RenderRefused, saying
    which entry or file and why, when the tree cannot become files an install writes."""
    files = adapter.agent.bind(adapter.render([*entries, *adapter.agent.reef_entries]), binding)
    for path, text in files.items():
        if not _PATH.fullmatch(path) or any(part in (".", "..") for part in path.split("/")):
            raise RenderRefused(f"the entries make a file path reef will not install: {path[:200]!r}")
        if "\0" in text:
            raise RenderRefused(f"the file {path} would hold a NUL character; remove it from the entry's text")
    return files


@dataclass(frozen=True)
class CanaryTree:
    """A canary's release, installed under CANARY_DIR beside the served one: its tree, binding (which names the
    canary's release, so its sessions are tagged with it), version and the share of sessions it serves."""

    entries: list[Entry]
    binding: Binding
    version: str
    share: float


def install_files(
    adapter: Adapter, entries: list[Entry], binding: Binding, version: str, canary: CanaryTree | None = None
) -> InstallFiles:
    """Render, bind and check an install (with a canary's tree under CANARY_DIR); BadRequest when a tree cannot
    become this adapter's files."""
    try:
        files = bound_files(adapter, entries, binding)
        if canary is not None:
            files = {**files, **_canary_files(adapter, canary, files)}
    except RenderRefused as exc:
        raise BadRequest(f"this release cannot be installed for {adapter.name}: {exc}", type="render_refused") from None
    checksum = framed_checksum(files)
    digests = {
        path: checked_digest(text.encode(), adapter.agent.state_keys.get(path.removeprefix(CANARY_PREFIX)))
        for path, text in sorted(files.items())
    }
    extra = {}
    if canary is not None:
        # Flat keys: the install script reads the previous install's files from the sidecar's nested lines.
        extra = {
            "canary_release_id": canary.binding.release_id,
            "canary_share": canary.share,
            "canary_version": canary.version,
        }
    sidecar = {
        **extra,
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


def _canary_files(adapter: Adapter, canary: CanaryTree, served: dict[str, str]) -> dict[str, str]:
    if any(path.startswith(CANARY_PREFIX) for path in served):
        raise RenderRefused(f"the served tree writes under {CANARY_DIR}, where an install keeps a canary")
    return {CANARY_PREFIX + path: text for path, text in bound_files(adapter, canary.entries, canary.binding).items()}


def framed_checksum(files: dict[str, str]) -> str:
    """SHA-256 over `path\\n<byte length>\\n<bytes>` for every file, in path order."""
    digest = hashlib.sha256()
    for path in sorted(files):
        data = files[path].encode()
        digest.update(f"{path}\n{len(data)}\n".encode())
        digest.update(data)
    return digest.hexdigest()
