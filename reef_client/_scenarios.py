"""Checking a scenario a person typed against the daemon's, so a typo is named (with the closest name) instead of
answering "no records match"."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reef_client._client import ReefClientError
from reef_contract import did_you_mean

if TYPE_CHECKING:
    from reef_client._client import ReefClient


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
