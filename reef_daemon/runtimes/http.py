"""The `http` runtime: any OpenAI- or Anthropic-compatible endpoint. Pure pass-through: the client's path
and body go upstream unchanged; only auth headers are replaced.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Iterator, Mapping
from typing import Any

import aiohttp
from multidict import CIMultiDict

from reef_daemon.contract import MESSAGES_ROUTE, RuntimeStatus
from reef_daemon.errors import UpstreamFailed
from reef_daemon.runtimes.base import Runtime, RuntimeResponse
from reef_daemon.settings import Settings

ANTHROPIC_VERSION = "2023-06-01"
# The encodings aiohttp decodes by itself (br and zstd only with their optional packages, else it refuses them).
DECODED_ENCODINGS = frozenset({"gzip", "deflate", "br", "zstd"})


class HttpRuntimeResponse(RuntimeResponse):
    def __init__(self, response: aiohttp.ClientResponse, timeout_s: float) -> None:
        self._response = response
        self._timeout_s = timeout_s
        self.status = response.status
        self.headers = _decoded_headers(response.headers)

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        content = self._response.content
        while True:
            # Each read is bounded by the session's sock_read timeout.
            with _upstream_errors(f"the upstream sent nothing for {self._timeout_s:g} s", "the upstream stream broke"):
                data = await content.readany()
            if not data:
                return
            yield data

    async def read(self) -> bytes:
        with _upstream_errors(
            f"the upstream did not answer within {self._timeout_s:g} s", "the upstream answer broke off"
        ):
            return await self._response.read()

    async def close(self) -> None:
        self._response.release()


class HttpRuntime(Runtime):
    kind = "http"
    answerer = "the upstream"

    def __init__(self, settings: Settings) -> None:
        self._session: aiohttp.ClientSession | None = None
        self.reconfigure(settings)

    def reconfigure(self, settings: Settings) -> None:
        if settings.inference.upstream_url is None:
            raise ValueError("the http runtime needs inference.upstream-url")
        self.url = settings.inference.upstream_url
        self.model = settings.inference.upstream_model
        self.timeout_s = settings.inference.timeout_s
        # No total limit (a long stream is fine); connecting and every read each get timeout-s.
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout_s, sock_read=self.timeout_s)
        self._api_key = settings.inference.upstream_api_key

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(
            connector=connector, auto_decompress=True, timeout=aiohttp.ClientTimeout(total=None)
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def describe(self) -> RuntimeStatus:
        return {"kind": self.kind, "model": self.model, "url": self.url}

    async def send(
        self, route: str, body: bytes, payload: dict[str, Any], headers: Mapping[str, str]
    ) -> RuntimeResponse:
        if self._session is None:
            raise RuntimeError("the http runtime is not started")
        outgoing = dict(headers)
        if self._api_key:
            if route.startswith(MESSAGES_ROUTE):
                outgoing["x-api-key"] = self._api_key
                outgoing.setdefault("anthropic-version", ANTHROPIC_VERSION)
            else:
                outgoing["Authorization"] = f"Bearer {self._api_key}"
        # Reef records what it relays, so it asks for plain bodies; an upstream that compresses anyway is decoded.
        outgoing["Accept-Encoding"] = "identity"
        url = self.url + route
        with _upstream_errors(
            f"the upstream at {self.url} did not answer within {self.timeout_s:g} s",
            f"cannot reach the upstream at {self.url}",
            broken_type="upstream_unreachable",
        ):
            response = await self._session.post(url, data=body, headers=outgoing, timeout=self._timeout)
        return HttpRuntimeResponse(response, self.timeout_s)


@contextlib.contextmanager
def _upstream_errors(timed_out: str, broken: str, *, broken_type: str = "upstream_broken") -> Iterator[None]:
    """The one place aiohttp's failures become `UpstreamFailed`: a timeout, or anything else the client raises."""
    try:
        yield
    except TimeoutError:
        raise UpstreamFailed(timed_out, type="upstream_timeout") from None
    except aiohttp.ClientError as exc:
        raise UpstreamFailed(f"{broken}: {_describe(exc)}", type=broken_type) from None


def _decoded_headers(headers: Mapping[str, str]) -> CIMultiDict[str]:
    """The upstream's headers, less a Content-Encoding that aiohttp has already decoded the body of."""
    relayed = CIMultiDict(headers)
    if relayed.get("Content-Encoding", "").strip().lower() in DECODED_ENCODINGS:
        relayed.popall("Content-Encoding")
    return relayed


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
