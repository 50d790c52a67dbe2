"""The harness tree: what reef evolves for a coding agent, as data. Shared by the adapters (which render it), the
daemon (which admits, stores and installs it) and the recipes (which propose changes to it); it imports none of
them.
"""

from __future__ import annotations

from reef_harness.tree import KINDS, OPERATIONS, Entry, Mutation, apply, entries_from_json, touches_kind

__all__ = ["KINDS", "OPERATIONS", "Entry", "Mutation", "apply", "entries_from_json", "touches_kind"]
