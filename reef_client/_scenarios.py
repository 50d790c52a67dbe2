"""Checking a scenario a person typed against the daemon's, so a typo is named (with the closest name) instead of
answering "no records match"."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from reef_client._client import ReefClientError

if TYPE_CHECKING:
    from reef_client._client import ReefClient


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean NAME?)` for the name of `known` closest to `word`, or "" when none is close."""
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


class UnknownScenario(ReefClientError):
    """The daemon has no scenario of that name; the message names the closest one and lists them all."""

    def __init__(self, name: str, known: list[str]) -> None:
        listed = f"the scenarios are {', '.join(known)}" if known else "there are no scenarios yet"
        super().__init__(f"no scenario named '{name}'{did_you_mean(name, known)}; {listed}")
        self.name = name
        self.known = known


def require_scenario(client: ReefClient, name: str) -> None:
    """Raise UnknownScenario unless the daemon has a scenario named `name`."""
    known = sorted(client.status()["scenarios"])
    if name not in known:
        raise UnknownScenario(name, known)
