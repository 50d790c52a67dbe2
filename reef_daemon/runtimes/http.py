"""The `http` runtime: any OpenAI- or Anthropic-compatible endpoint. Pure pass-through: the client's path
and body go upstream unchanged; only auth headers are replaced.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import aiohttp

from reef_daemon.contract import RuntimeStatus
from reef_daemon.errors import UpstreamFailed
from reef_daemon.runtimes.base import Runtime, RuntimeResponse
from reef_daemon.settings import Settings

ANTHROPIC_VERSION = "2023-06-01"
READ_SIZE = 65536


class HttpRuntimeResponse(RuntimeResponse):
    def __init__(self, response: aiohttp.ClientResponse, timeout_s: float) -> None:
        self._response = response
        self._timeout_s = timeout_s
        self.status = response.status
        self.headers = response.headers

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        content = self._response.content
        while True:
            try:
                data = await content.readany()  # each read is bounded by the session's sock_read timeout
            except TimeoutError:
                raise UpstreamFailed(
                    f"the upstream sent nothing for {self._timeout_s:g} s", type="upstream_timeout"
                ) from None
            except aiohttp.ClientError as exc:
                raise UpstreamFailed(f"the upstream stream broke: {_describe(exc)}", type="upstream_broken") from None
            if not data:
                return
            yield data

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except TimeoutError:
            raise UpstreamFailed(
                f"the upstream did not answer within {self._timeout_s:g} s", type="upstream_timeout"
            ) from None
        except aiohttp.ClientError as exc:
            raise UpstreamFailed(f"the upstream answer broke off: {_describe(exc)}", type="upstream_broken") from None

    async def close(self) -> None:
        self._response.release()


class HttpRuntime(Runtime):
    kind = "http"

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
            connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None)
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
            if route.startswith("/v1/messages"):
                outgoing["x-api-key"] = self._api_key
                outgoing.setdefault("anthropic-version", ANTHROPIC_VERSION)
            else:
                outgoing["Authorization"] = f"Bearer {self._api_key}"
        url = self.url + route
        try:
            response = await self._session.post(url, data=body, headers=outgoing, timeout=self._timeout)
        except TimeoutError:
            raise UpstreamFailed(
                f"the upstream at {self.url} did not answer within {self.timeout_s:g} s",
                type="upstream_timeout",
            ) from None
        except aiohttp.ClientError as exc:
            raise UpstreamFailed(
                f"cannot reach the upstream at {self.url}: {_describe(exc)}", type="upstream_unreachable"
            ) from None
        return HttpRuntimeResponse(response, self.timeout_s)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
