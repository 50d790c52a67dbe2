"""Reading a folder into a task's fixture (relative path to file text) for `reef tasks add --fixture DIR`, bounded as
the daemon bounds it, so a wrong folder is refused before anything large is read or sent."""

from __future__ import annotations

from pathlib import Path

from reef_contract import MAX_FIXTURE_CHARS, MAX_FIXTURE_FILES


class FixtureError(Exception):
    """The folder cannot be a fixture; the message says why, naming the file."""


def read_fixture(folder: Path) -> dict[str, str]:
    """Every file under `folder`, by its path relative to it (with /), as UTF-8 text."""
    if not folder.is_dir():
        raise FixtureError(f"{folder} is not a folder")
    files: dict[str, str] = {}
    total = 0
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            raise FixtureError(f"{relative} is a link; a fixture holds plain files")
        if path.is_dir():
            continue
        if not path.is_file():  # a FIFO, socket or device: reading one can block or never end
            raise FixtureError(f"{relative} is not a regular file (a pipe, socket or device); a fixture holds files")
        if len(files) == MAX_FIXTURE_FILES:
            raise FixtureError(f"{folder} has more than {MAX_FIXTURE_FILES} files")
        if path.stat().st_size > 4 * MAX_FIXTURE_CHARS:  # a UTF-8 character takes at most 4 bytes
            raise FixtureError(f"{relative} is larger than a fixture may be ({MAX_FIXTURE_CHARS} characters)")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise FixtureError(f"{relative} is not UTF-8 text") from None
        except OSError as exc:
            raise FixtureError(f"cannot read {relative}: {exc.strerror or exc}") from None
        total += len(text)
        if total > MAX_FIXTURE_CHARS:
            raise FixtureError(f"the files of {folder} hold more than {MAX_FIXTURE_CHARS} characters")
        files[relative] = text
    return files
