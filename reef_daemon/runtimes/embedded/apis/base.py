"""What every API shape has: a parsed request, the finished answer, and a renderer for JSON and SSE."""

from __future__ import annotations

import json
import math
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from reef_daemon.errors import BadRequest
from reef_daemon.runtimes.embedded.job import Finished
from reef_daemon.runtimes.embedded.sampling import SamplingDefaults, SamplingParams
from reef_daemon.runtimes.embedded.templating import ChatTurn


@dataclass(frozen=True)
class GenerationRequest:
    """A request reduced to what generation needs."""

    turns: list[ChatTurn]
    params: SamplingParams
    stream: bool


@dataclass(frozen=True)
class Answer:
    """A finished generation, as the renderers need it."""

    text: str
    finished: Finished
    input_tokens: int
    output_tokens: int


class Renderer(ABC):
    """One response in one API's shape; stream renderers keep ids and counters across frames."""

    def __init__(self, model: str, payload: dict[str, Any], params: SamplingParams, input_tokens: int) -> None:
        self.model = model
        self.payload = payload
        self.params = params
        self.input_tokens = input_tokens
        self.created = int(time.time())

    @abstractmethod
    def body(self, answer: Answer) -> dict[str, Any]:
        """The non-streaming response."""

    @abstractmethod
    def start(self) -> bytes:
        """The stream's opening frames."""

    @abstractmethod
    def delta(self, text: str) -> bytes:
        """Frames carrying new text."""

    @abstractmethod
    def end(self, answer: Answer) -> bytes:
        """The closing frames, the API's terminal frame last."""


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def dump(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def event_frame(value: dict[str, Any]) -> bytes:
    """An SSE frame named after the payload's `type`, as the Responses and Messages APIs send them."""
    return f"event: {value['type']}\ndata: {dump(value)}\n\n".encode()


def stream_flag(payload: dict[str, Any]) -> bool:
    stream = payload.get("stream", False)
    if stream is None:
        return False
    if not isinstance(stream, bool):
        raise BadRequest("stream must be true or false")
    return stream


def sampling(
    payload: dict[str, Any],
    defaults: SamplingDefaults,
    max_keys: tuple[str, ...],
    stop: tuple[str, ...] = (),
    seed: int | None = None,
) -> SamplingParams:
    """The request's temperature, top_p and length limit (the first of `max_keys` set), over the defaults."""
    return SamplingParams.resolve(
        defaults,
        temperature=number(payload, "temperature"),
        top_p=number(payload, "top_p"),
        max_tokens=max_tokens(payload, *max_keys),
        stop=stop,
        seed=seed,
    )


def number(payload: dict[str, Any], key: str) -> float | None:
    value = payload.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRequest(f"{key} must be a number")
    return float(value)


def max_tokens(payload: dict[str, Any], *keys: str) -> int | None:
    """The first of `keys` that is set, as a positive whole number; None when none is."""
    for key in keys:
        value = payload.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BadRequest(f"{key} must be a whole number of at least 1")
        return value
    return None


def seed(payload: dict[str, Any]) -> int | None:
    value = payload.get("seed")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest("seed must be a whole number")
    return value


def stop_sequences(value: Any, key: str, defaults: SamplingDefaults) -> tuple[str, ...]:
    """The request's stop sequences, at most `defaults.max_stop_sequences` of at most `.max_stop_chars` each."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadRequest(f"{key} must be a string or a list of strings")
    if len(value) > defaults.max_stop_sequences:
        raise BadRequest(
            f"{key} has {len(value)} stop sequences; the embedded model takes at most {defaults.max_stop_sequences} "
            "(the setting inference.max-stop-sequences)"
        )
    for index, item in enumerate(value):
        if len(item) > defaults.max_stop_chars:
            raise BadRequest(
                f"{key}[{index}] has {len(item)} characters; a stop sequence has at most {defaults.max_stop_chars} "
                "(the setting inference.max-stop-chars)"
            )
    return tuple(value)


def role_of(value: Any, roles: dict[str, str], where: str) -> str:
    """The template role a message's `role` names, or a BadRequest listing the accepted ones."""
    role = roles.get(value) if isinstance(value, str) else None
    if role is None:
        raise BadRequest(f"{where}.role must be one of {', '.join(roles)}")
    return role


def message_list(payload: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = payload.get(key)
    if not isinstance(value, list) or not value:
        raise BadRequest(f"{key} must be a non-empty list of messages")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise BadRequest(f"{key}[{index}] must be an object")
    return value
