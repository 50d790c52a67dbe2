"""An agent's own markup taken out of a message, in time linear in its length: whole blocks of a tag, its content and
its closing tag (`<system-reminder>…</system-reminder>`, `<environment_context>…`), the rest kept as written.

A block runs from an opening tag to the first closing tag of the same name after it; an opening tag that is never
closed is text. One regular expression that pairs the tags itself (`<(tag)…>.*?</\\1>`) reads on to the end of the
message from every opening tag that is never closed: quadratic, and a pasted message of such tags stalls whatever
reads it. Here each tag is found once, and each opening tag looks its closing tag up in the closing tags of its name,
which are passed in order, once.
"""

from __future__ import annotations

import re

# An opening or closing tag. Its attributes stop at the next `<`, so finding every tag reads the text once.
_TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)(?:\s[^<>]*)?>")


def without_agent_markup(text: str) -> str:
    """`text` without the blocks of markup it holds (a tag, its content, its closing tag)."""
    if "<" not in text:
        return text
    opening: list[tuple[str, int, int]] = []  # name, start, end of each opening tag, in order
    closing: dict[str, list[tuple[int, int]]] = {}  # start and end of each closing tag, by name, in order
    for tag in _TAG.finditer(text):
        if tag.group(1):
            closing.setdefault(tag.group(2), []).append((tag.start(), tag.end()))
        else:
            opening.append((tag.group(2), tag.start(), tag.end()))
    passed = dict.fromkeys(closing, 0)  # per name: how many of its closing tags lie behind the reading point
    kept: list[str] = []
    cursor = 0
    for name, start, end in opening:
        closes = closing.get(name)
        if start < cursor or closes is None:
            continue
        at = passed[name]
        while at < len(closes) and closes[at][0] < end:
            at += 1
        passed[name] = at
        if at == len(closes):
            continue
        kept.append(text[cursor:start])
        cursor = closes[at][1]
    kept.append(text[cursor:])
    return "".join(kept)
