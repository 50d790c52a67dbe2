"""reef's own in-session commands for agents without extensions: `reefine`, `versions`, `good` and `bad` as command
entries (`good` and `bad` score the session's last answer as a person's report, as the TUI's keys do).

For codex and dsh their text tells the session's model to drive the `reef-<adapter>` wrapper. Claude Code and
opencode run a command's `` !`shell line` `` before the model sees it, so theirs run the wrapper themselves and only
ask the model to show what it printed. Their ids are reserved, so no proposal can change them (see
`reef_daemon.harness.admission.RESERVED_IDS`)."""

from __future__ import annotations

import json

from reef_harness import Entry

_REEFINE = """\
# Ask reef to change this harness: {typed} <what to change>

The person's request is the text they typed after {typed}. Never edit harness files yourself: reef's proposer writes
the change, checks it and publishes it as a new version.

1. If the environment variable REEF_HARNESS_WRAPPER is unset, say that this session was not started with
   {wrapper} and stop.
2. Run this once, with the request as one quoted argument (it reaches reef over the network, so ask to run it
   outside the sandbox if you must; allow it up to 30 minutes):
   "$REEF_HARNESS_WRAPPER" request "<the request>" --wait
3. Tell the person the result line it printed and its "How to use" line, if any.
4. If a version was published, ask whether to install it. On yes run "$REEF_HARNESS_WRAPPER" update and tell them
   to start a new session to use it.
"""

_VERSIONS = """\
# List this harness's versions, or install one: {typed} [vN install]

1. If the environment variable REEF_HARNESS_WRAPPER is unset, say that this session was not started with
   {wrapper} and stop.
2. Run "$REEF_HARNESS_WRAPPER" versions and show the person its table as it is.
3. If they asked to install a version (for example "{typed} v3 install"), ask them to confirm, then run
   "$REEF_HARNESS_WRAPPER" update --release v3 and tell them to start a new session to use it. Never install a
   version they did not name.
"""


_THUMB = """\
# Score this session's last answer {verdict}: {typed} [what was {verdict} about it]

1. If the environment variable REEF_HARNESS_WRAPPER is unset, say that this session was not started with
   {wrapper} and stop.
2. Run this once, with the words the person typed after {typed} (if any) as one quoted argument:
   "$REEF_HARNESS_WRAPPER" {verdict} "<their words>"
3. Tell the person the line it printed, and nothing else. Do not change your earlier answer because of it.
"""
# The person's score on the session's last answer, as the TUI's keys give it: `reef-<agent> good|bad [words]`.
THUMBS = ("good", "bad")


def reef_commands(adapter: str, prefix: str) -> tuple[Entry, ...]:
    """The reserved `reefine`, `versions`, `good` and `bad` command entries for an agent whose commands are typed
    `<prefix>name`."""
    wrapper = f"reef-{adapter}"
    texts = [("reefine", _REEFINE), ("versions", _VERSIONS), *((name, _THUMB) for name in THUMBS)]
    return tuple(
        Entry(
            name,
            "command",
            {"name": name, "text": text.format(typed=f"{prefix}{name}", wrapper=wrapper, verdict=name)},
        )
        for name, text in texts
    )


_SHELL_REEFINE = """\
---
{frontmatter}
---

reef filed the person's change request and followed it until it settled. What it printed:

!`{wrapper} request "$ARGUMENTS" --wait`

Show the person that output as it is and run nothing else. If it names a published version vN, tell them that
`/versions vN install` installs it and that a new session uses it.
"""

_SHELL_VERSIONS = """\
---
{frontmatter}
---

reef's versions of this harness (or, when the person named one with `install`, what installing it did):

!`{wrapper} versions $ARGUMENTS`

Show the person that output as it is and run nothing else.
"""


_SHELL_THUMB = """\
---
{frontmatter}
---

reef scored this session's last answer {verdict}, as the person asked. What it printed:

!`{wrapper} {verdict} "$ARGUMENTS"`

Show the person that line as it is and run nothing else.
"""


def shell_commands(adapter: str, fields: dict[str, str | bool]) -> tuple[Entry, ...]:
    """The reserved `reefine` and `versions` command entries for an agent that runs `` !`...` `` lines in command
    files; `fields` are extra frontmatter lines (such as the permission to run the wrapper)."""
    wrapper = f"reef-{adapter}"
    descriptions = {
        "reefine": f"Ask reef to change this harness: /reefine <what to change> (runs {wrapper} request)",
        "versions": f"List this harness's versions, or install one: /versions [vN install] (runs {wrapper})",
        **{
            name: f"Score this session's last answer {name}: /{name} [what was {name} about it] (runs {wrapper} {name})"
            for name in THUMBS
        },
    }
    entries = []
    texts = [("reefine", _SHELL_REEFINE), ("versions", _SHELL_VERSIONS), *((name, _SHELL_THUMB) for name in THUMBS)]
    for name, text in texts:
        lines = [f"description: {json.dumps(descriptions[name])}"]
        for key, value in fields.items():
            lines.append(f"{key}: {json.dumps(value.format(wrapper=wrapper) if isinstance(value, str) else value)}")
        body = text.format(frontmatter="\n".join(lines), wrapper=wrapper, verdict=name)
        entries.append(Entry(name, "command", {"name": name, "text": body}))
    return tuple(entries)
