"""`good` and `bad` inside an agent's session: a person's score on that session's last answer, as the TUI's keys."""

from __future__ import annotations

import os
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
        scale = client.status()["score_scale"]
        score = scale["max"] if good else scale["min"]
        client.report(scenario, [receipts[-1]], score=score, feedback=feedback or None)
    print(f"scored the last answer {score:g} ({'good' if good else 'bad'}): {receipts[-1]}")
    return 0
