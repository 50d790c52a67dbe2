"""Receipts as lists show them: shortened as git shortens hashes, but past the time they start with; the detail
and copies keep them whole."""

from __future__ import annotations

# A daemon's receipt is 12 hex digits of the millisecond it was made, then random ones: the time, and 4 random
# digits that tell apart records of the same millisecond (8 would be alike for every record of the same minute).
SHORT = 16


def short(receipt: str) -> str:
    """The first SHORT characters."""
    return receipt[:SHORT]


def abbreviated(receipt: str) -> str:
    """The short form with an ellipsis, for sentences (`scored 01a2b3c4…: 0.25`)."""
    return f"{short(receipt)}…" if len(receipt) > SHORT else receipt
