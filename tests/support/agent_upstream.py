"""The model behind reef in adapter tests: agents' calls get the fake upstream's answers (chat completions,
responses, messages); the reefine proposer's calls (a system prompt starting `Task:`) get the scripted model's, and
an agent proposer's calls (its instructions in the prompt) the scripted agent session's, when a test sets one."""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web

from tests.support.fake_proposer_model import FakeProposerModel
from tests.support.fake_upstream import FakeUpstream
from tests.support.scripted_agent import ScriptedAgent


class AgentUpstream:
    """Both fakes behind one loopback port, served from a thread with its own event loop (`start`/`stop`); or
    just their `app()`, served by the caller (`close` the unused loop then)."""

    def __init__(self) -> None:
        self.agents = FakeUpstream()
        self.proposer = FakeProposerModel()
        self.session = ScriptedAgent()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runner: web.AppRunner | None = None
        self.url = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/messages", self.agents._messages)
        app.router.add_post("/v1/messages/count_tokens", self.agents._count_tokens)
        return app

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()  # aiohttp keeps the body, so the chosen fake reads it again
        first = (payload.get("messages") or [{}])[0]
        from_proposer = first.get("role") == "system" and str(first.get("content", "")).startswith("Task:")
        if from_proposer:
            return await self.proposer._chat(request)
        return await (self.session.chat if self.session.drives(payload) else self.agents._chat)(request)

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        return await (self.session.responses if self.session.drives(payload) else self.agents._responses)(request)

    def start(self) -> str:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=30)
        return self.url

    async def _start(self) -> None:
        self.runner = web.AppRunner(self.app())
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    def close(self) -> None:
        self.loop.close()

    def stop(self) -> None:
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()
