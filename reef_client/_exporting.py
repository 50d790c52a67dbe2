"""Writing an export to a file, for `reef export -o` and the TUI's export dialog: the lines go to a file beside the
target, renamed onto it only once the export is whole, so a failed export never leaves half a dataset."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


@contextmanager
def whole_file(output: Path, *, keep_empty: bool = True) -> Iterator[TextIO]:
    """A file written as `output.partial` and renamed onto `output` when the block ends without an error; removed
    when it raises, and (unless `keep_empty`) when nothing was written. Raises OSError when it cannot be written."""
    partial = output.with_name(output.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as sink:
            yield sink
            empty = sink.tell() == 0
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    if empty and not keep_empty:
        partial.unlink()
        return
    os.replace(partial, output)


def nothing_to_export(scenario: str, format: str) -> str:
    """Why an export wrote no line, in words."""
    pairs = " (a pair needs two records of one prompt with different scores)" if format == "preference" else ""
    return f"nothing of {scenario} to export as {format}{pairs}"


def unwritable(path: Path) -> str | None:
    """Why `path` cannot be written as an export file, or None when it can: checked before exporting, so a
    folder that is missing is said in words."""
    if path.is_dir():
        return f"{path} is a folder; name a file in it"
    folder = path.parent
    if not folder.is_dir():
        return f"there is no folder {folder}"
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"{path} cannot be written (permission denied)"
    return None
