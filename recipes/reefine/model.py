"""Asking the served model: the runtime clients use (upstream or embedded), over chat completions.

The proposer's calls are not records: they are the recipe's own work, counted in the step's metrics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from reef_contract import CHAT_ROUTE
from reef_daemon.recipe_api import Runtime, UpstreamFailed


class ModelFailed(Exception):
    """The served model gave no answer text. The message says why, for the step's reason."""


@dataclass
class ServedModel:
    runtime: Runtime
    model: str
    max_tokens: int = 8192  # a cap on every call (harness.max-tokens), for small or slow models
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    async def ask(self, system: str, user: str, *, max_tokens: int) -> str:
        """One chat completion; returns the assistant's text."""
        payload = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": min(max_tokens, self.max_tokens),
            "temperature": 0.2,
            "stream": False,
        }
        body = json.dumps(payload).encode()
        self.calls += 1
        try:
            response = await self.runtime.send(CHAT_ROUTE, body, payload, {"content-type": "application/json"})
            try:
                raw = await response.read()
                status = response.status
            finally:
                await response.close()
        except UpstreamFailed as exc:
            raise ModelFailed(f"the served model could not be reached: {exc.message}") from None
        if status != 200:
            raise ModelFailed(f"the served model answered HTTP {status}")
        try:
            answer = json.loads(raw)
            text = answer["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelFailed("the served model's answer was not a chat completion") from None
        usage = answer.get("usage") or {}
        self.input_tokens += int(usage.get("prompt_tokens") or 0)
        self.output_tokens += int(usage.get("completion_tokens") or 0)
        if not isinstance(text, str) or not text.strip():
            raise ModelFailed("the served model answered with no text")
        return text

    def metrics(self) -> dict[str, int]:
        return {
            "proposer_calls": self.calls,
            "proposer_input_tokens": self.input_tokens,
            "proposer_output_tokens": self.output_tokens,
        }
