"""Adapters: how a harness tree becomes one coding agent's files. Pure data and rendering functions.

Each adapter renders the tree without any model binding; the install script adds the binding on the person's
machine. `get_adapter(name)` is the one way to find one.
"""

from __future__ import annotations

from adapters import claude, codex, dsh, opencode, pi
from adapters._agent import SESSION_ENV, AgentSide, Binding, checked_digest
from adapters._base import Adapter, RenderRefused
from adapters._locate import find_agent, not_found

__all__ = [
    "ADAPTERS",
    "SESSION_ENV",
    "Adapter",
    "AgentSide",
    "Binding",
    "RenderRefused",
    "checked_digest",
    "find_agent",
    "get_adapter",
    "not_found",
]

ADAPTERS: dict[str, Adapter] = {
    adapter.name: adapter for adapter in (pi.ADAPTER, codex.ADAPTER, dsh.ADAPTER, claude.ADAPTER, opencode.ADAPTER)
}


def get_adapter(name: str) -> Adapter:
    """The adapter called `name`; ValueError naming the accepted ones otherwise."""
    adapter = ADAPTERS.get(name)
    if adapter is None:
        raise ValueError(f"unknown adapter '{name}'; accepted: {', '.join(ADAPTERS)}")
    return adapter
