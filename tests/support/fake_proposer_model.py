"""A scripted model for harness (reefine) tests: answers the proposer's plan, answer, review and failure-skill
calls from per-task queues, and keeps every prompt it saw.

The task is read from the first line of the system prompt (`Task: answer`). An empty queue falls back to a
plan of one step whose behaviour check asks the capital of France and expects "Paris" (what the fake upstream
answers an agent), a review that says the entries deliver, a judge that finds no difference, and an answer that
writes nothing usable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

DELIVERS = json.dumps({"delivers": True, "covered": ["all of it"], "uncovered": []})
SAME = json.dumps({"better": "same", "reason": "both answers do the task alike"})


def plan(check: Any) -> str:
    """A plan of one step with `check` as its behaviour check."""
    return json.dumps({"steps": [{"step": "write a skill", "needs_tool": False}], "check": check})


def prefers(letter: str, reason: str = "it does the task") -> str:
    """A judge's answer preferring answer A or B (or "same")."""
    return json.dumps({"better": letter, "reason": reason})


PLAN = plan({"prompt": "What is the capital of France?", "regex": "Paris"})


def answer(design: str, *entries: dict[str, Any]) -> str:
    """An answer array as the proposer asks for it."""
    return json.dumps([{"design": design}, *entries])


def skill(entry_id: str, text: str = "# Be brief\nAnswer in one sentence.") -> dict[str, Any]:
    return {"id": entry_id, "kind": "skill", "config": {"name": entry_id, "text": text}}


def review(delivers: bool, *uncovered: str) -> str:
    return json.dumps({"delivers": delivers, "covered": [], "uncovered": list(uncovered)})


@dataclass
class FakeProposerModel:
    scripts: dict[str, list[str]] = field(default_factory=dict)
    prompts: list[tuple[str, str]] = field(default_factory=list)  # (task, user prompt)

    def script(self, task: str, *replies: str) -> None:
        self.scripts.setdefault(task, []).extend(replies)

    def seen(self, task: str) -> list[str]:
        return [prompt for name, prompt in self.prompts if name == task]

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        return app

    async def _chat(self, request: web.Request) -> web.Response:
        payload = await request.json()
        messages = payload["messages"]
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        user = messages[-1]["content"]
        task = system.splitlines()[0].removeprefix("Task: ").strip() if system else "chat"
        self.prompts.append((task, user))
        queue = self.scripts.get(task, [])
        defaults = {"plan": PLAN, "review": DELIVERS, "judge": SAME, "chat": "Paris."}
        reply = queue.pop(0) if queue else defaults.get(task, "no JSON here")
        return web.json_response(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": payload.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": len(reply) // 4},
            }
        )
