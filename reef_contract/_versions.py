"""A weight version as answers, records and token data carry it: `INCARNATION:SEQUENCE`."""

from __future__ import annotations

from typing import NamedTuple


class WeightVersion(NamedTuple):
    """Which weights made an answer. The incarnation names the weights a run started from (a fingerprint of their
    files, or `random-…` for weights that cannot be fingerprinted); the sequence counts the swaps since, and only
    grows for one incarnation."""

    incarnation: str
    sequence: int

    def __str__(self) -> str:
        return f"{self.incarnation}:{self.sequence}"

    @classmethod
    def parse(cls, text: str) -> WeightVersion | None:
        """The version `text` names; None when it names none (no incarnation, or no whole sequence number)."""
        incarnation, _, sequence = text.rpartition(":")
        return cls(incarnation, int(sequence)) if incarnation and sequence.isascii() and sequence.isdigit() else None
