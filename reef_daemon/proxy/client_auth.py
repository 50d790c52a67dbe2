"""Whose credential goes upstream with a model call: the client's own login, or none (reef's key, if it has one)."""

from __future__ import annotations

from collections.abc import Mapping

from reef_contract import TOKEN_HEADER
from reef_daemon.auth import TokenGate, client_credential
from reef_daemon.errors import BadRequest
from reef_daemon.settings import InferenceSection

PASS = "pass"  # noqa: S105 - a mode, inference.client-auth


def forwards_client_auth(headers: Mapping[str, str], gate: TokenGate, inference: InferenceSection) -> bool:
    """Whether the client's `Authorization` / `x-api-key` go upstream unchanged.

    With inference.client-auth=pass: when reef needs no token, or the client sent reef's token in x-reef-token (its
    `Authorization` then is its own). A client that sent reef's token as its bearer (no x-reef-token) keeps it here.
    With reef (the default): only when reef needs no token and holds no upstream key, as a plain proxy. A 400 for a
    pass-mode client whose own credential is one of reef's tokens: reef's token never goes upstream."""
    if inference.client_auth != PASS:
        return not gate.enabled and not inference.upstream_api_key
    if gate.enabled and TOKEN_HEADER not in headers:
        return False
    credential = client_credential(headers)
    if credential is not None and gate.enabled and gate.is_reefs(credential):
        raise BadRequest(
            f"the request carries reef's token as its own credential too; send reef's token only in {TOKEN_HEADER}, "
            f"and your provider's credential in Authorization or x-api-key",
            type="reef_token_as_credential",
        )
    return True
