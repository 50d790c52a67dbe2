"""What a derived report may keep of what a user wrote: prose only, on one line, bounded. Code (fenced blocks, an
unclosed fence to the end, indented blocks, inline spans in backticks) is taken out, since it is where keys, paths
and private source turn up. Every pattern here is linear in the text's length."""

from __future__ import annotations

import re

CODE = " [code] "
_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
# A run of backticks up to the same run on its line; a backtick with no closing run takes the rest of its line. Read
# after the fences are out, a run is at most two backticks long, so trying a shorter run costs one scan of a line.
_INLINE_CODE = re.compile(r"(`+)[^\n]*?\1|`[^\n]*")
_INDENTED_CODE = re.compile(r"^(?: {4}|\t).*$", re.MULTILINE)


def without_code(text: str, limit: int = 200) -> str:
    """`text` with its code taken out, on one line, at most `limit` characters."""
    prose = _FENCED_CODE.sub(CODE, text)
    prose = _INDENTED_CODE.sub("", prose)
    prose = _INLINE_CODE.sub(CODE, prose)
    line = " ".join(prose.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
