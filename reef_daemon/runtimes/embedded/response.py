"""The embedded runtime's answers as the proxy reads them: a fixed JSON body, or a generation in progress."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from reef_daemon.errors import UpstreamFailed
from reef_daemon.runtimes.base import RuntimeResponse
from reef_daemon.runtimes.embedded.apis.base import Answer, Renderer
from reef_daemon.runtimes.embedded.job import Finished, Job, TextDelta

JSON_HEADERS = {"content-type": "application/json"}
SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}


class JsonAnswer(RuntimeResponse):
    """A body known at once: an error in the API's own shape, or a token count."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.headers = JSON_HEADERS
        self._body = json.dumps(body, ensure_ascii=False).encode()

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        yield self._body

    async def read(self) -> bytes:
        return self._body


class GenerationAnswer(RuntimeResponse):
    """A job on the generation thread, relayed as SSE frames as tokens come, or as JSON once it is done.

    Leaving early (the client went away) cancels the job before its next token.
    """

    def __init__(self, job: Job, renderer: Renderer, stream: bool) -> None:
        self.status = 200
        self.headers = SSE_HEADERS if stream else JSON_HEADERS
        self._job = job
        self._renderer = renderer
        self._text: list[str] = []

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        # The opening frames go out with the first text, so the first bytes mark the first token (the record's
        # time to first token means that).
        opening = self._renderer.start()
        try:
            while True:
                events = [await self._job.events.get()]
                while not self._job.events.empty():
                    events.append(self._job.events.get_nowait())
                texts = [event.text for event in events if isinstance(event, TextDelta)]
                frame = opening
                if texts:
                    self._text.extend(texts)
                    frame += self._renderer.delta("".join(texts))
                last = events[-1]
                if isinstance(last, Finished):
                    yield frame + self._renderer.end(self._answer(last))
                    return
                yield frame
                opening = b""
        finally:
            self._job.cancelled = self._job.finished is None

    async def read(self) -> bytes:
        try:
            while True:
                event = await self._job.events.get()
                if isinstance(event, TextDelta):
                    self._text.append(event.text)
                else:
                    body = self._renderer.body(self._answer(event))
                    return json.dumps(body, ensure_ascii=False).encode()
        finally:
            self._job.cancelled = self._job.finished is None

    def _answer(self, finished: Finished) -> Answer:
        if finished.reason in ("error", "cancelled"):
            raise UpstreamFailed(
                f"the embedded model stopped: {finished.error or finished.reason}", type="runtime_failed"
            )
        return Answer("".join(self._text), finished, len(self._job.prompt_ids), len(self._job.output_ids))

    def token_data(self) -> dict[str, Any]:
        return self._job.token_data()

    def release(self) -> str:
        return self._job.last_version

    async def close(self) -> None:
        self._job.cancelled = self._job.finished is None
