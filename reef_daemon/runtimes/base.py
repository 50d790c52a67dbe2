"""What the proxy needs from a runtime: send a provider request, get back a status, headers and bytes.

The proxy relays, records and issues receipts the same way for every runtime; a runtime only produces the
provider's own response (JSON, or SSE frames for streams) and, when it can, the token data of what it generated.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from reef_daemon.contract import RuntimeStatus
from reef_daemon.settings import Settings


class RuntimeResponse(ABC):
    """One answer being received. `chunks()` or `read()` is called once; `close()` always."""

    status: int
    headers: Mapping[str, str]

    @property
    def is_event_stream(self) -> bool:
        return self.headers.get("content-type", "").split(";")[0].strip().lower() == "text/event-stream"

    @abstractmethod
    def chunks(self) -> AsyncGenerator[bytes, None]:
        """The body as it arrives."""

    @abstractmethod
    async def read(self) -> bytes:
        """The whole body."""

    def token_data(self) -> dict[str, Any] | None:
        """Prompt and output token ids, log-probs and weight versions, when the runtime generated the answer."""
        return None

    def release(self) -> str | None:
        """The weight version or release that served this answer, when the runtime knows it."""
        return None

    async def close(self) -> None:
        return None


class Runtime(ABC):
    kind: str

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def send(
        self, route: str, body: bytes, payload: dict[str, Any], headers: Mapping[str, str]
    ) -> RuntimeResponse:
        """Send one request on `route` (e.g. `/v1/messages`). Raises `UpstreamFailed` if no answer can be had."""

    @abstractmethod
    def describe(self) -> RuntimeStatus:
        """kind, model and whatever else `/reef/status` should show."""

    def reconfigure(self, settings: Settings) -> None:  # noqa: B027 - optional for runtimes with live settings
        """Apply changed settings without a restart (upstream URL, model, key, timeout)."""
