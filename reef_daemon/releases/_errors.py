"""The release store's one error type."""

from __future__ import annotations


class ReleaseStoreError(RuntimeError):
    """A release could not be stored or read (an unknown release, git-lfs missing or failing)."""
