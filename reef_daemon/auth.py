"""Bearer-token auth. Tokens are kept only as SHA-256 digests and compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping

OPEN_PATHS = frozenset({"/healthz"})


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenGate:
    """Accepts any of the configured tokens; replaceable at runtime when the config file changes."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self.replace(tokens)

    def replace(self, tokens: Iterable[str]) -> None:
        self._digests = tuple(_digest(token) for token in tokens if token)

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def allows(self, headers: Mapping[str, str]) -> bool:
        """True when auth is off, or the request presents an accepted token."""
        if not self._digests:
            return True
        presented = presented_token(headers)
        if presented is None:
            return False
        candidate = _digest(presented)
        matched = False
        for digest in self._digests:  # no early exit: the time taken does not depend on which token matched
            matched |= hmac.compare_digest(candidate, digest)
        return matched


def presented_token(headers: Mapping[str, str]) -> str | None:
    """The credential of `Authorization: Bearer <t>`, else of `x-api-key: <t>` (how Anthropic clients send it)."""
    authorization = headers.get("Authorization")
    if authorization is not None:
        scheme, _, credential = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            return None
        return credential.strip()
    api_key = headers.get("x-api-key", "").strip()
    return api_key or None
