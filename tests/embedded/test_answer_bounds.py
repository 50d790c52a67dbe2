"""Every answer of the embedded runtime is bounded whatever its request asks: at most inference.max-answer-tokens
tokens and inference.max-answer-s seconds, and cut once it loops over one span (inference.repeat-stop-tokens);
`reef status` says so. The engine here
is a fake small model that repeats itself for ever, the way SmolLM2-135M answers Claude Code's long prompts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from reef_cli.render.status import status_view
from reef_contract import MESSAGES_ROUTE
from reef_daemon.runtimes.embedded import runtime as runtime_module
from reef_daemon.runtimes.embedded.job import Job
from reef_daemon.runtimes.embedded.repetition import RepetitionWatch
from reef_daemon.runtimes.embedded.runtime import EmbeddedRuntime
from reef_daemon.runtimes.embedded.stopping import StopRules
from reef_daemon.settings import load_settings

END = 0  # the fake model's end-of-turn id
LOOP = [ord(c) for c in "all work and no play makes jack a dull boy. "]


class CharTokenizer:
    """Token id = one character's code point; the prompt is the last message's text."""

    def apply_chat_template(self, messages: list[dict[str, str]], **_options: Any) -> list[int]:
        return [ord(c) for c in messages[-1]["content"]]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids)


class LoopingEngine:
    """A model that never ends its turn: it says `tokens` over and over (every token through the shared stop rules,
    as the real engines do), or, with `varied`, never repeats a span at all."""

    name = "looping"
    model_name = "looping"
    context_length = 1_000_000
    version = "test:0"
    tokenizer = CharTokenizer()

    def __init__(self, tokens: list[int]) -> None:
        self._tokens = tokens
        self._rules = StopRules(frozenset({END}), self.context_length)

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def identity(self) -> dict[str, str]:
        return {"model": self.model_name}

    def describe(self) -> dict[str, Any]:
        return {}

    def adapter_version(self, scenario: str) -> str:
        return self.version

    def submit(self, job: Job) -> None:
        at = 0
        while True:
            token = self._tokens[at % len(self._tokens)]
            job.record(token, -0.1, self.version)
            at += 1
            if not self._rules.take(job, token):
                return


Start = Callable[..., Awaitable[EmbeddedRuntime]]


@pytest.fixture
async def start_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Start]:
    started: list[EmbeddedRuntime] = []

    async def start(tokens: list[int], **settings: str) -> EmbeddedRuntime:
        monkeypatch.setattr(runtime_module, "build_engine", lambda _settings: LoopingEngine(tokens))
        overrides = {"reef.state-dir": str(tmp_path), **{f"inference.{k}": v for k, v in settings.items()}}
        runtime = EmbeddedRuntime(load_settings(overrides=overrides, environ={}))
        await runtime.start()
        started.append(runtime)
        return runtime

    yield start
    for runtime in started:
        await runtime.close()


async def ask(runtime: EmbeddedRuntime, max_tokens: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Messages request as Claude Code sends one; the answer and its token data."""
    payload = {"model": "m", "max_tokens": max_tokens, "messages": [{"role": "user", "content": "Say hi"}]}
    answer = await runtime.send(MESSAGES_ROUTE, json.dumps(payload).encode(), payload, {})
    body = json.loads(await answer.read())
    tokens = answer.token_data()
    assert tokens is not None
    return body, tokens


async def test_a_request_for_32000_tokens_gets_at_most_the_cap(start_runtime: Start) -> None:
    runtime = await start_runtime(list(range(1, 30_000)), **{"max-answer-tokens": "300"})
    body, tokens = await ask(runtime, 32_000)
    # It ends as finished: an agent told max_tokens asks the model to go on (Claude Code three times, then fails).
    assert body["stop_reason"] == "end_turn" and body["usage"]["output_tokens"] == 300
    assert len(tokens["output_ids"]) == 300
    assert tokens["sampling"]["max_tokens"] == 300 and tokens["sampling"]["asked_max_tokens"] == 32_000
    assert tokens["cut"] == (
        "the answer reached 300 tokens, the most one may have (inference.max-answer-tokens); its request asked for "
        "32000"
    )
    fewer_body, fewer = await ask(runtime, 20)  # a request asking for fewer keeps its own limit
    assert fewer_body["stop_reason"] == "max_tokens" and len(fewer["output_ids"]) == 20
    assert "asked_max_tokens" not in fewer["sampling"] and "cut" not in fewer


async def test_an_answer_that_loops_is_cut_and_says_why(start_runtime: Start) -> None:
    runtime = await start_runtime(LOOP, **{"repeat-stop-tokens": "100"})
    body, tokens = await ask(runtime, 32_000)
    assert body["stop_reason"] == "end_turn"
    # The span repeated back to back for 100 tokens after its first showing, and not one token more.
    assert len(tokens["output_ids"]) == len(LOOP) + 100
    assert tokens["cut"].startswith(f"the answer repeated a span of {len(LOOP)} token(s)")
    assert "jack a dull boy" in body["content"][0]["text"]


async def test_with_the_stop_off_a_loop_runs_to_the_cap(start_runtime: Start) -> None:
    runtime = await start_runtime(LOOP, **{"repeat-stop-tokens": "0", "max-answer-tokens": "500"})
    _body, tokens = await ask(runtime, 32_000)
    assert len(tokens["output_ids"]) == 500 and "repeated a span" not in tokens["cut"]


async def test_an_answer_that_runs_out_of_time_ends_there_and_says_why(start_runtime: Start) -> None:
    never_looping = list(range(1, 1_000_000))
    runtime = await start_runtime(never_looping, **{"max-answer-s": "0.2", "max-answer-tokens": "1000000"})
    body, tokens = await ask(runtime, 1_000_000)
    assert body["stop_reason"] == "end_turn" and 0 < len(tokens["output_ids"]) < 1_000_000
    assert tokens["cut"] == "the answer took 0.2 s, the most one may (inference.max-answer-s)"


def test_only_a_span_repeated_back_to_back_counts_as_a_loop() -> None:
    watch = RepetitionWatch(8)
    said: list[int] = []
    for token in [1, 2, 3, 1, 2, 4, 1, 2, 3, 5, 1, 1, 2, 2, 3, 3]:  # spans recur, never back to back for 8 tokens
        said.append(token)
        assert watch.add(said) is None
    for count, token in enumerate([7] * 9, start=1):  # one token repeated: a span of one
        said.append(token)
        assert watch.add(said) == (1 if count == 9 else None)


async def test_status_states_the_bounds_of_every_answer(start_runtime: Start) -> None:
    runtime = await start_runtime(
        LOOP, **{"max-answer-tokens": "700", "max-answer-s": "45", "repeat-stop-tokens": "90"}
    )
    sampling = runtime.describe()["sampling"]
    assert (sampling["max_answer_tokens"], sampling["max_answer_s"], sampling["repeat_stop_tokens"]) == (700, 45, 90)
    console = Console(record=True, width=250)
    console.print(status_view({"runtime": runtime.describe()}, "http://reef"))  # type: ignore[typeddict-item]
    line = next(line for line in console.export_text().splitlines() if line.startswith("answers"))
    assert "at most 700 tokens and 45 s whatever a request asks" in line
    assert "cut once its last 90 tokens repeat one span" in line
