"""Receipts as lists show them: shortened as git shortens hashes; the detail and copies keep them whole."""

from __future__ import annotations

SHORT = 8  # 32 bits of a random receipt: enough to tell records apart at a glance


def short(receipt: str) -> str:
    """The first SHORT characters."""
    return receipt[:SHORT]


def abbreviated(receipt: str) -> str:
    """The short form with an ellipsis, for sentences (`scored 01a2b3c4…: 0.25`)."""
    return f"{short(receipt)}…" if len(receipt) > SHORT else receipt
