"""A fake model server for tests: speaks chat completions, responses and messages, streaming or not.

Faults are chosen per request with the `x-fake-fault` header (or the `fault` attribute for every request):
`500`, `429`, `400` (a request the model refuses), `slow` (sleeps past any test timeout), `cut` (stream stops
mid-way, no terminal frame), `no-terminal` (stream ends cleanly without a terminal frame), `no-stream-options` (a 400
naming `stream_options` for a body that has them, as servers that do not know the option answer).
`x-fake-delay-ms` paces the stream frames.
A chat stream reports its usage as OpenAI's does: only when asked with `stream_options.include_usage`, then in one
more chunk with no choices before `[DONE]`, and `"usage": null` in every other chunk.
`x-fake-encoding: gzip|deflate` (or the `encoding` attribute) compresses every answer whatever the client accepts,
as some providers do. While `hold` is set, answers wait until it is cleared (`hold.set()` releases them).
Everything it receives is kept in `received` so tests can check what reef forwarded.
A chat completion whose request holds `REEF-SAY[text]` (a harness rule, say) answers `text` instead (the last
such marker), so a test can give two harnesses different answers.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

ANSWER_WORDS = ["The", " capital", " of", " France", " is", " Paris", "."]
_SAY = re.compile(r"REEF-SAY\[([^\]\\]*)\]")


def _words(payload: dict[str, Any]) -> list[str]:
    said = _SAY.findall(json.dumps(payload))
    return [said[-1]] if said else ANSWER_WORDS


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeUpstream:
    fault: str | None = None
    delay_ms: float = 0.0
    encoding: str | None = None
    hold: asyncio.Event | None = None
    max_body: int = 1024**2  # the largest request it reads (aiohttp's default)
    bearer: str | None = None  # when set, a provider that answers only `Authorization: Bearer <bearer>`
    received: list[Received] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._compressing], client_max_size=self.max_body)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        return app

    @web.middleware
    async def _compressing(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        if not response.prepared:
            self._compress(request, response)
        return response

    def _compress(self, request: web.Request, response: web.StreamResponse) -> None:
        encoding = request.headers.get("x-fake-encoding", self.encoding)
        if encoding:
            response.enable_compression(force=web.ContentCoding(encoding))

    async def _begin(self, request: web.Request) -> tuple[dict[str, Any], str | None, float]:
        body = await request.read()
        self.received.append(Received(request.path, dict(request.headers), body))
        if self.bearer is not None and request.headers.get("Authorization") != f"Bearer {self.bearer}":
            raise web.HTTPUnauthorized(
                text='{"type": "error", "error": {"type": "authentication_error", "message": "invalid bearer"}}',
                content_type="application/json",
            )
        if self.hold is not None:
            await self.hold.wait()
        fault = request.headers.get("x-fake-fault", self.fault)
        delay_ms = float(request.headers.get("x-fake-delay-ms", self.delay_ms))
        if fault == "500":
            raise web.HTTPInternalServerError(
                text='{"error": {"message": "the model crashed"}}', content_type="application/json"
            )
        if fault == "429":
            raise web.HTTPTooManyRequests(
                text='{"error": {"type": "rate_limit_error", "message": "slow down, retry in 1s"}}',
                content_type="application/json",
            )
        if fault == "400":
            raise web.HTTPBadRequest(
                text='{"error": {"type": "invalid_request_error", "message": "the prompt is too long"}}',
                content_type="application/json",
            )
        if fault == "slow":
            await asyncio.sleep(3600)
        payload = json.loads(body)
        if fault == "no-stream-options" and "stream_options" in payload:
            raise web.HTTPBadRequest(
                text='{"error": {"type": "invalid_request_error", "message": "Unrecognized request argument '
                'supplied: stream_options", "param": null, "code": null}}',
                content_type="application/json",
            )
        return payload, fault, delay_ms

    async def _stream(
        self, request: web.Request, frames: list[str], fault: str | None, delay_ms: float, terminal: int
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        self._compress(request, response)
        await response.prepare(request)
        for index, frame in enumerate(frames):
            if fault == "cut" and index == len(frames) // 2:
                request.transport.close()  # type: ignore[union-attr]
                return response
            if fault == "no-terminal" and index >= terminal:
                break
            await response.write(frame.encode())
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
        await response.write_eof()
        return response

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        payload, fault, delay_ms = await self._begin(request)
        model = payload.get("model", "fake-model")
        created = int(time.time())
        words = _words(payload)
        if not payload.get("stream"):
            return web.json_response(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "".join(words)},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": 12,
                        "completion_tokens": len(words),
                        "total_tokens": 19,
                    },
                }
            )
        base: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }
        options = payload.get("stream_options")
        usage_asked = isinstance(options, dict) and options.get("include_usage") is True
        if usage_asked:
            base["usage"] = None
        frames = [f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': {'role': 'assistant'}}]})}\n\n"]
        for word in words:
            chunk = {**base, "choices": [{"index": 0, "delta": {"content": word}}]}
            frames.append(f"data: {json.dumps(chunk)}\n\n")
        final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        frames.append(f"data: {json.dumps(final)}\n\n")
        if usage_asked:
            usage = {"prompt_tokens": 12, "completion_tokens": len(words), "total_tokens": 12 + len(words)}
            frames.append(f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n")
        frames.append("data: [DONE]\n\n")
        return await self._stream(request, frames, fault, delay_ms, terminal=len(frames) - 1)

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        payload, fault, delay_ms = await self._begin(request)
        model = payload.get("model", "fake-model")
        text = "".join(ANSWER_WORDS)
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        usage = {
            "input_tokens": 12,
            "output_tokens": len(ANSWER_WORDS),
            "total_tokens": 19,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        done = {
            "id": "resp_fake",
            "object": "response",
            "created_at": int(time.time()),
            "model": model,
            "status": "completed",
            "output": [message],
            "usage": usage,
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
        }
        if not payload.get("stream"):
            return web.json_response(done)
        started = {**done, "status": "in_progress", "output": [], "usage": None}
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": started}),
            ("response.in_progress", {"response": started}),
            (
                "response.output_item.added",
                {"output_index": 0, "item": {**message, "status": "in_progress", "content": []}},
            ),
            (
                "response.content_part.added",
                {
                    "item_id": "msg_fake",
                    "output_index": 0,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                },
            ),
        ]
        for word in ANSWER_WORDS:
            events.append(
                (
                    "response.output_text.delta",
                    {"item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": word},
                )
            )
        events += [
            (
                "response.output_text.done",
                {"item_id": "msg_fake", "output_index": 0, "content_index": 0, "text": text},
            ),
            (
                "response.content_part.done",
                {"item_id": "msg_fake", "output_index": 0, "content_index": 0, "part": message["content"][0]},
            ),
            ("response.output_item.done", {"output_index": 0, "item": message}),
            ("response.completed", {"response": done}),
        ]
        frames = []
        for number, (name, data) in enumerate(events):
            frames.append(f"event: {name}\ndata: {json.dumps({'type': name, 'sequence_number': number, **data})}\n\n")
        return await self._stream(request, frames, fault, delay_ms, terminal=len(frames) - 1)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        payload, fault, delay_ms = await self._begin(request)
        model = payload.get("model", "fake-model")
        text = "".join(ANSWER_WORDS)
        if not payload.get("stream"):
            return web.json_response(
                {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 12, "output_tokens": len(ANSWER_WORDS)},
                }
            )
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "message": {
                        "id": "msg_fake",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 12, "output_tokens": 1},
                    }
                },
            ),
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ]
        for word in ANSWER_WORDS:
            events.append(("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": word}}))
        events += [
            ("content_block_stop", {"index": 0}),
            (
                "message_delta",
                {
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": len(ANSWER_WORDS)},
                },
            ),
            ("message_stop", {}),
        ]
        frames = [f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events]
        return await self._stream(request, frames, fault, delay_ms, terminal=len(frames) - 1)

    async def _count_tokens(self, request: web.Request) -> web.Response:
        await self._begin(request)
        return web.json_response({"input_tokens": 12})
