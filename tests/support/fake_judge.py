"""A fake judge for tests: a chat-completions server whose verdicts follow a script, the way a judge model would
read the user's next message (the question is the JSON object reef sends); or one that fails as a real judge can
(slow, garbage, a score off the scale).

`mode` chooses: `scripted` (a next message that thanks or moves on is accepted, one that starts with "No" is a
correction, one that says "useless" a complaint, anything else neutral; a group of attempts is scored by whether
each cites a file path), `slow` (answers after `slow_s`), `garbage` (prose, no JSON), `out-of-scale` (a verdict
with a score of 7), `lying` (the scripted verdict with the opposite end of the scale as its score), `undecided`
(the scripted verdict on every other call, neutral on the others). Every request is kept in `received`.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

FILE_PATH = re.compile(r"\b[\w-]+(?:/[\w.-]+)+\.\w+\b")


def scripted_verdict(next_message: str) -> dict[str, Any]:
    said = next_message.strip().lower()
    if said.startswith("no"):
        return {"verdict": "corrected", "reason": "the user asked for the file path the answer left out"}
    if "useless" in said:
        return {"verdict": "complained", "reason": "the user is unhappy with the answer"}
    if said.startswith(("thanks", "great", "next")):
        return {"verdict": "accepted", "reason": "the user moved on"}
    return {"verdict": "neutral", "reason": "the next message says nothing of the answer"}


@dataclass
class FakeJudge:
    mode: str = "scripted"
    slow_s: float = 5.0
    received: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        return app

    async def _chat(self, request: web.Request) -> web.Response:
        payload = await request.json()
        self.received.append({"payload": payload, "authorization": request.headers.get("authorization")})
        question = payload["messages"][-1]["content"]
        asked: dict[str, Any] = json.loads(question)
        if self.mode == "slow":
            await asyncio.sleep(self.slow_s)
        if self.mode == "garbage":
            text = "I think the user was fairly happy, overall, more or less."
        elif self.mode == "out-of-scale":
            text = json.dumps({"verdict": "accepted", "reason": "great", "score": 7})
        elif "attempts" in asked:
            scores = [
                {"id": attempt["id"], "score": 1.0 if FILE_PATH.search(attempt["text"]) else 0.1, "reason": "cites"}
                for attempt in asked["attempts"]
            ]
            text = json.dumps({"scores": scores})
        else:
            verdict = scripted_verdict(asked["user_next_message"])
            if self.mode == "lying":
                verdict["score"] = 1.0 if verdict["verdict"] in ("corrected", "complained") else 0.0
            elif self.mode == "undecided" and len(self.received) % 2 == 0:
                verdict = {"verdict": "neutral", "reason": "not sure"}
            text = "Thinking it over. " + json.dumps(verdict)
        words = len(text.split())
        return web.json_response(
            {
                "id": "judge-1",
                "object": "chat.completion",
                "model": payload.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": len(question.split()), "completion_tokens": words},
            }
        )
