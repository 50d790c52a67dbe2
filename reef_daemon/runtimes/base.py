"""What the proxy needs from a runtime: send a provider request, get back a status, headers and bytes.

The proxy relays, records and issues receipts the same way for every runtime; a runtime only produces the
provider's own response (JSON, or SSE frames for streams) and, when it can, the token data of what it generated.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

from reef_contract import RuntimeStatus
from reef_daemon.settings import Settings


class RuntimeResponse(ABC):
    """One answer being received. `chunks()` or `read()` is called once; `close()` always."""

    status: int
    headers: Mapping[str, str]
    # Reef asked for this stream's usage though the client did not (runtimes/stream_usage.py): its usage-only chunk
    # is for the record, and the relay keeps it from the client.
    usage_asked: bool = False

    @property
    def is_event_stream(self) -> bool:
        return self.headers.get("content-type", "").split(";")[0].strip().lower() == "text/event-stream"

    @abstractmethod
    def chunks(self) -> AsyncGenerator[bytes, None]:
        """The body as it arrives."""

    @abstractmethod
    async def read(self) -> bytes:
        """The whole body."""

    def body_at_hand(self) -> bool:
        """Whether some of the body has arrived already, so that the first read of `chunks()` will not wait."""
        return False

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
    # Who answered, as a record's error names it ("the upstream answered 400").
    answerer: str

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def send(
        self,
        route: str,
        body: bytes,
        payload: dict[str, Any],
        headers: Mapping[str, str],
        *,
        scenario: str | None = None,
    ) -> RuntimeResponse:
        """Send one request on `route` (e.g. `/v1/messages`) for `scenario` (which picks its LoRA adapter on a
        runtime that serves adapters). Raises `UpstreamFailed` if no answer can be had."""

    @abstractmethod
    def describe(self) -> RuntimeStatus:
        """kind, model and whatever else `/reef/status` should show."""

    def failure(self) -> str | None:
        """Why the started runtime can answer no request (the embedded model's generation thread stopped), for
        /healthz and `reef status`; None while it can."""
        return None

    def reconfigure(self, settings: Settings) -> None:  # noqa: B027 - optional for runtimes with live settings
        """Apply changed settings without a restart (upstream URL, model, key, timeout)."""


class WeightSwappable(Runtime):
    """A runtime serving weights of its own (the embedded model), which a weight recipe may replace while it serves."""

    @property
    @abstractmethod
    def weight_version(self) -> str:
        """The version of the weights serving now, `<incarnation>:<sequence>`. Raises RuntimeError before `start`."""

    @property
    @abstractmethod
    def weights_dir(self) -> Path:
        """The Hugging Face folder the serving weights were loaded from. Raises RuntimeError before `start`."""

    @abstractmethod
    async def swap_weights(self, state: Mapping[str, Any]) -> str:
        """Serve new weights from the next token on.

        Args:
            state: a full or partial state dict (parameter name -> tensor).

        Returns:
            The new weight version.

        Raises:
            KeyError: a name that is not one of the model's parameters; the serving weights stay.
            ValueError: a shape or type that does not fit; the serving weights stay.
            RuntimeError: the runtime is not started or is shutting down.
        """

    @property
    @abstractmethod
    def serves_adapters(self) -> bool:
        """Whether `swap_adapter` works (the engine serves LoRA adapters)."""

    @abstractmethod
    async def swap_adapter(self, scenario: str, state: Mapping[str, Any], scale: float) -> str:
        """Serve `scenario`'s requests with a new LoRA adapter from their next token on; other scenarios go on.

        Args:
            scenario: the scenario the adapter serves.
            state: the adapter's tensors, named as PEFT saves them (`base_model.model.<module>.lora_A.weight`, ...).
            scale: the factor of the adapter's output, alpha / r.

        Returns:
            The adapter's version (`<incarnation>:<sequence>`, as weight versions), stamped on the tokens it makes.

        Raises:
            ValueError: tensors that do not fit the model; the scenario's adapter stays.
            RuntimeError: the runtime is not started, is shutting down, or its engine serves no adapters.
        """

    @abstractmethod
    def adapter_version(self, scenario: str) -> str:
        """The version serving `scenario` now: its adapter's, or `weight_version` for a scenario without one."""
