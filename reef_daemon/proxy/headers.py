"""Which headers cross the proxy, in each direction."""

from __future__ import annotations

from collections.abc import Mapping

from multidict import CIMultiDict

from reef_contract import REEF_HEADER_PREFIX, TAG_HEADER_PREFIX
from reef_daemon.errors import BadRequest

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "host",
    }
)
# Reef asks for plain bodies so it can read what it records; auth headers are decided below.
_NOT_FORWARDED = HOP_BY_HOP | {"accept-encoding", "authorization", "x-api-key"}


def upstream_headers(incoming: Mapping[str, str], *, pass_client_auth: bool) -> dict[str, str]:
    """Request headers to send upstream. The client's own auth headers go only when they are not reef's token."""
    outgoing: dict[str, str] = {}
    for name, value in incoming.items():
        lower = name.lower()
        if lower.startswith(REEF_HEADER_PREFIX):
            continue
        if lower in _NOT_FORWARDED:
            if pass_client_auth and lower in ("authorization", "x-api-key"):
                outgoing[name] = value
            continue
        outgoing[name] = value
    return outgoing


def client_headers(upstream: Mapping[str, str]) -> CIMultiDict[str]:
    """Response headers to relay to the client."""
    relayed: CIMultiDict[str] = CIMultiDict()
    for name, value in upstream.items():
        lower = name.lower()
        if lower in HOP_BY_HOP or lower.startswith(REEF_HEADER_PREFIX):
            continue
        relayed.add(name, value)
    return relayed


def tags_from(incoming: Mapping[str, str]) -> dict[str, str]:
    """`x-reef-tag-<name>: value` headers, as lower-cased names and stripped, non-empty values; a 400 for one that is
    not UTF-8 text (a tag is stored, and shown, as text)."""
    tags: dict[str, str] = {}
    for name, value in incoming.items():
        lower = name.lower()
        if lower.startswith(TAG_HEADER_PREFIX) and len(lower) > len(TAG_HEADER_PREFIX) and value.strip():
            if not _is_utf8(name) or not _is_utf8(value):
                said = f"the header {name!r} is not UTF-8 text; send its value as UTF-8"
                raise BadRequest(said, type="invalid_header")
            tags[lower[len(TAG_HEADER_PREFIX) :]] = value.strip()[:512]
    return tags


def _is_utf8(text: str) -> bool:
    """Whether `text` came as UTF-8 (the server keeps other bytes as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
