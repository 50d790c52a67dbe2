"""`good` and `bad` inside an agent's session: a person's score on that session's last answer, as the TUI's keys."""

from __future__ import annotations

import os
import re
import sys

from adapters._agent import SESSION_ENV
from adapters.wrapper.installed import Installed
from adapters.wrapper.session import session_receipts
from reef_client import ReefClient


def thumbs(installed: Installed, good: bool, feedback: str | None) -> int:
    """Score the newest model call tagged with this session (REEF_HARNESS_SESSION): the deployment's best score for
    `good`, its worst for `bad`, with the words after the command as feedback. Exit 1 when there is no answer yet."""
    name = installed.wrapper
    session = os.environ.get(SESSION_ENV)
    if not session:
        print(f"{name}: not inside a session started with {name}; run it there (or score later with the TUI)",
              file=sys.stderr)  # fmt: skip
        return 1
    scenario = installed.binding.scenario
    with ReefClient(installed.binding.url, installed.token) as client:
        receipts = session_receipts(client, scenario, session, 0)
        if not receipts:
            print(f"{name}: no answer in this session yet to score; ask the agent something first", file=sys.stderr)
            return 1
        meant = _before_the_command(client, receipts)
        if meant is None:
            print(f"{name}: no answer in this session before this command to score", file=sys.stderr)
            return 1
        scale = client.status()["score_scale"]
        score = scale["max"] if good else scale["min"]
        client.report(scenario, [meant], score=score, feedback=feedback or None)
    print(f"scored the last answer {score:g} ({'good' if good else 'bad'}): {meant}")
    return 0


# A person's `/good`, `/bad` (`$good`, `$bad` in codex) as the start of their message.
_TYPED_COMMAND = re.compile(r"\s*[/$](?:good|bad)\b")


def _before_the_command(client: ReefClient, receipts: list[str]) -> str | None:
    """The newest of the session's answers given before the person typed the command. Where the session's model
    runs the wrapper itself (codex, dsh), the newest calls are the ones it made for the command (their request's
    last user message is the command), which are not the answer the person meant."""
    for receipt in reversed(receipts):
        if not _TYPED_COMMAND.match(_last_user_text(client.record(receipt).get("request"))):
            return receipt
    return None


def _last_user_text(request: object) -> str:
    """The text of a request's last user message: chat and messages (`messages`), responses (`input`)."""
    if not isinstance(request, dict):
        return ""
    turns = request.get("messages", request.get("input"))
    if not isinstance(turns, list):
        return turns if isinstance(turns, str) else ""
    for turn in reversed(turns):
        if isinstance(turn, dict) and turn.get("role") == "user":
            content = turn.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            return ""
    return ""
