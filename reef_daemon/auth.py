"""Bearer-token auth. Tokens are kept only as SHA-256 digests and compared in constant time."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Iterator, Mapping

from reef_contract import HEALTH_ROUTE, SCENARIO_HEADER, TOKEN_HEADER

OPEN_PATHS = frozenset({HEALTH_ROUTE})


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenGate:
    """Accepts any of the configured tokens; replaceable at runtime when the config file changes."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self._lent: dict[bytes, str] = {}  # digest -> the one scenario its model calls may be recorded in
        self.replace(tokens)

    def replace(self, tokens: Iterable[str]) -> None:
        self._digests = tuple(_digest(token) for token in tokens if token)

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def allows(self, headers: Mapping[str, str], *, model_call: bool = False) -> bool:
        """True when auth is off, or the request presents an accepted token. A lent token counts only for a
        model call (`model_call`) in the scenario it was lent for."""
        if not self._digests:
            return True
        presented = presented_token(headers)
        if presented is None:
            return False
        candidate = _digest(presented)
        matched = False
        for digest in self._digests:  # no early exit: the time taken does not depend on which token matched
            matched |= hmac.compare_digest(candidate, digest)
        if model_call:
            scenario = headers.get(SCENARIO_HEADER, "").strip()
            for digest, lent_for in self._lent.items():
                matched |= hmac.compare_digest(candidate, digest) and scenario == lent_for
        return matched

    def is_reefs(self, credential: str) -> bool:
        """Whether `credential` is one of reef's tokens (lent ones included), compared in constant time."""
        candidate = _digest(credential)
        matched = False
        for digest in (*self._digests, *self._lent):
            matched |= hmac.compare_digest(candidate, digest)
        return matched

    @contextlib.contextmanager
    def lend(self, scenario: str) -> Iterator[str | None]:
        """A fresh token good only for model calls recorded in `scenario`, until the block ends; None when auth is
        off (none is needed).

        For processes reef starts itself, such as a candidate harness's trial run, which must never see the
        daemon's own tokens."""
        if not self._digests:
            yield None
            return
        token = secrets.token_urlsafe(32)
        digest = _digest(token)
        self._lent[digest] = scenario
        try:
            yield token
        finally:
            self._lent.pop(digest, None)


def presented_token(headers: Mapping[str, str]) -> str | None:
    """Reef's token as the client presents it: `x-reef-token: <t>` (which leaves `Authorization` to the client's own
    login), else the credential of `Authorization: Bearer <t>`, else of `x-api-key: <t>` (how Anthropic clients send
    it)."""
    own = headers.get(TOKEN_HEADER)
    if own is not None:
        return own.strip() or None
    return client_credential(headers)


def client_credential(headers: Mapping[str, str]) -> str | None:
    """The credential of `Authorization: Bearer <t>`, else of `x-api-key: <t>`."""
    authorization = headers.get("Authorization")
    if authorization is not None:
        scheme, _, credential = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            return None
        return credential.strip()
    api_key = headers.get("x-api-key", "").strip()
    return api_key or None
