"""A release's files against its parent's, as one unified diff."""

from __future__ import annotations

import difflib


def files_diff(parent: dict[str, str], child: dict[str, str]) -> str:
    """Unified diff of every file added, removed or changed from `parent` to `child`; empty when identical."""
    chunks: list[str] = []
    for path in sorted(set(parent) | set(child)):
        before, after = parent.get(path), child.get(path)
        if before == after:
            continue
        chunks.extend(
            difflib.unified_diff(
                (before or "").splitlines(keepends=True),
                (after or "").splitlines(keepends=True),
                fromfile=f"a/{path}" if before is not None else "/dev/null",
                tofile=f"b/{path}" if after is not None else "/dev/null",
            )
        )
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)
