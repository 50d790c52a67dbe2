"""The embedded runtime's pure parts, without the model: request parsing, content flattening, sampling, text."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from reef_daemon.errors import BadRequest
from reef_daemon.runtimes.embedded import runtime as runtime_module
from reef_daemon.runtimes.embedded.apis import chat, messages, responses
from reef_daemon.runtimes.embedded.runtime import EmbeddedRuntime
from reef_daemon.runtimes.embedded.sampling import SamplingDefaults, SamplingParams, new_generator, pick_token
from reef_daemon.runtimes.embedded.templating import ChatTurn, flatten_content
from reef_daemon.runtimes.embedded.text import TextAssembler
from reef_daemon.settings import load_settings
from tests.support.waiting import eventually

DEFAULTS = SamplingDefaults(temperature=0.3, top_p=0.8, max_tokens=99)


class CharTokenizer:
    """Token id = one character's code point; enough to exercise incremental text."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids)


def feed(text: TextAssembler, word: str) -> str:
    return "".join(text.add(ord(c)) for c in word)


def test_content_parts_flatten_to_text() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, {"type": "input_text", "text": "b"}]
    assert flatten_content(parts, "content") == "a\n[image]\nb"
    with pytest.raises(BadRequest, match="content\\[0\\]"):
        flatten_content([{"type": "hologram"}], "content")


def test_chat_request_reads_roles_tools_and_sampling() -> None:
    request = chat.parse(
        {
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
                {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "w", "arguments": "{}"}}]},
                {"role": "tool", "content": "sunny"},
            ],
            "tools": [{"type": "function", "function": {"name": "w"}}],
            "max_tokens": 5,
            "temperature": 0,
            "stop": "\n",
        },
        DEFAULTS,
    )
    assert request.turns == [
        ChatTurn("system", "Be brief."),
        ChatTurn("user", "Weather?"),
        ChatTurn("assistant", "[tool call] w({})"),
        ChatTurn("user", "[tool result] sunny"),
    ]
    assert request.params == SamplingParams(
        max_tokens=5,
        temperature=0.0,
        top_p=0.8,
        stop=("\n",),
        defaulted=("top_p",),
        max_answer_s=120.0,
        repeat_stop_tokens=128,
    )
    with pytest.raises(BadRequest, match="n must be 1"):
        chat.parse({"messages": [{"role": "user", "content": "x"}], "n": 2}, DEFAULTS)


@pytest.mark.parametrize(
    ("api", "payload"),
    [
        (chat, {"messages": [{"role": "user", "content": "x"}]}),
        (responses, {"input": "x"}),
        (messages, {"messages": [{"role": "user", "content": "x"}]}),
    ],
)
def test_unset_sampling_takes_the_defaults_and_says_so(api: Any, payload: dict[str, Any]) -> None:
    params = api.parse(payload, DEFAULTS).params
    assert (params.temperature, params.top_p, params.max_tokens) == (0.3, 0.8, 99)
    assert params.used()["defaulted"] == ["temperature", "top_p", "max_tokens"]
    explicit = api.parse({**payload, "temperature": 1, "top_p": 1, _limit(api): 7}, DEFAULTS).params
    assert (explicit.temperature, explicit.top_p, explicit.max_tokens, explicit.defaulted) == (1.0, 1.0, 7, ())


def _limit(api: Any) -> str:
    return {chat: "max_completion_tokens", responses: "max_output_tokens", messages: "max_tokens"}[api]


def test_responses_request_reads_instructions_and_items() -> None:
    request = responses.parse(
        {
            "instructions": "Be brief.",
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files"}]},
                {"type": "reasoning", "summary": []},
                {"type": "function_call", "name": "shell", "arguments": '{"cmd": "ls"}', "call_id": "c"},
                {"type": "function_call_output", "call_id": "c", "output": "a.txt"},
            ],
            "max_output_tokens": 7,
        },
        DEFAULTS,
    )
    assert [turn.role for turn in request.turns] == ["system", "user", "assistant", "user"]
    assert request.turns[2].content == '[tool call] shell({"cmd": "ls"})'
    assert request.params.max_tokens == 7 and request.params.temperature == DEFAULTS.temperature


def test_messages_request_reads_system_blocks_and_tool_results() -> None:
    turns = messages.conversation(
        {
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "name": "w", "input": {"q": 1}}]},
                {"role": "user", "content": [{"type": "tool_result", "content": [{"type": "text", "text": "ok"}]}]},
            ],
        }
    )
    assert turns[0] == ChatTurn("system", "Be brief.")
    assert turns[2] == ChatTurn("assistant", '[tool call] w({"q": 1})')
    assert turns[3] == ChatTurn("user", "[tool result] ok")
    with pytest.raises(BadRequest, match="max_tokens"):
        messages.parse({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, DEFAULTS)


def test_greedy_pick_reports_the_model_log_prob() -> None:
    logits = torch.tensor([1.0, 3.0, 2.0])
    token, logprob = pick_token(logits, SamplingParams(max_tokens=1, temperature=0.0), new_generator(0))
    assert token == 1
    assert math.isclose(logprob, float(torch.log_softmax(logits, -1)[1]), rel_tol=1e-6)


def test_log_prob_is_after_temperature_and_before_top_p() -> None:
    logits = torch.tensor([5.0, 1.0, 0.0])
    params = SamplingParams(max_tokens=1, temperature=0.5, top_p=0.01)
    token, logprob = pick_token(logits, params, new_generator(1))
    assert token == 0  # top-p keeps only the most likely token
    assert math.isclose(logprob, float(torch.log_softmax(logits / 0.5, -1)[0]), rel_tol=1e-6)
    assert logprob < 0.0  # the log-prob of the full tempered distribution, not of the truncated one


def test_seeded_sampling_repeats() -> None:
    logits = torch.zeros(50)
    params = SamplingParams(max_tokens=1, seed=7)
    draws = [[pick_token(logits, params, g)[0] for _ in range(5)] for g in (new_generator(7), new_generator(7))]
    assert draws[0] == draws[1]


def test_text_holds_back_a_possible_stop_sequence_and_cuts_at_it() -> None:
    text = TextAssembler(CharTokenizer(), ("END",))
    assert feed(text, "abcE") == "abc"
    assert feed(text, "N") == ""
    assert feed(text, "D") == "" and text.stopped_by == "END"
    assert text.text == "abc"


def test_text_releases_what_was_held_when_no_stop_came() -> None:
    text = TextAssembler(CharTokenizer(), ("END",))
    assert feed(text, "xEN") == "x"
    assert text.finish() == "EN"
    assert text.text == "xEN"


def test_text_waits_for_a_whole_character() -> None:
    text = TextAssembler(CharTokenizer(), ())
    assert text.add(0xFFFD) == ""  # decoders show an unfinished UTF-8 sequence as U+FFFD


class CleaningTokenizer(CharTokenizer):
    """A tokenizer whose own decoding cleans up what its backend's gives (here: "_" to a space), as transformers'
    may clean spaces up."""

    clean_up_tokenization_spaces = True
    backend_tokenizer = CharTokenizer()

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return super().decode(ids, skip_special_tokens).replace("_", " ")


def test_text_is_the_tokenizers_own_decoding_where_it_adds_to_its_backends() -> None:
    text = TextAssembler(CleaningTokenizer(), ())
    assert feed(text, "a_b") + text.finish() == "a b"


def test_text_of_the_models_tokenizer_is_its_decoding_of_the_whole_answer(embedded_models: Path) -> None:
    """Taken from the `tokenizers` backend token by token: what the tokenizer decodes from all the ids at once, for
    characters of several tokens and a special token among them."""
    from transformers import AutoTokenizer

    (folder,) = {found.parent for found in embedded_models.rglob("tokenizer.json")}
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    ids = tokenizer("Ça coûte 5 € — 東京へ 🚀🌊, naïve café.")["input_ids"] + [tokenizer.eos_token_id]
    text = TextAssembler(tokenizer, ())
    streamed = "".join(text.add(token) for token in ids) + text.finish()
    assert streamed == tokenizer.decode(ids, skip_special_tokens=True) == "Ça coûte 5 € — 東京へ 🚀🌊, naïve café."


class SlowTokenizer:
    """A chat template that holds each prompt until `release` is set, and counts the prompts it reads at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.reading = 0
        self.most_at_once = 0
        self.read = 0
        self._lock = threading.Lock()

    def apply_chat_template(self, messages: list[dict[str, str]], **_options: Any) -> list[int]:
        with self._lock:
            self.reading += 1
            self.read += 1
            self.most_at_once = max(self.most_at_once, self.reading)
        self.release.wait(30)
        with self._lock:
            self.reading -= 1
        return [ord(c) for c in messages[-1]["content"]]


class PromptOnlyEngine:
    """An engine that only has a tokenizer: enough for `count_tokens`."""

    name = "prompt-only"
    model_name = "prompt-only"
    context_length = 1000
    version = "test:0"

    def __init__(self, tokenizer: SlowTokenizer) -> None:
        self.tokenizer = tokenizer

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass


async def test_prompts_are_tokenized_on_threads_of_their_own_and_a_long_one_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenizer = SlowTokenizer()
    monkeypatch.setattr(runtime_module, "build_engine", lambda _settings: PromptOnlyEngine(tokenizer))
    settings = load_settings(
        overrides={"reef.state-dir": str(tmp_path), "inference.max-prompt-chars": "10"}, environ={}
    )
    runtime = EmbeddedRuntime(settings)
    await runtime.start()
    try:
        count = "/v1/messages/count_tokens"
        payload = {"messages": [{"role": "user", "content": "hello"}]}
        counting = [asyncio.create_task(runtime.send(count, b"", payload, {})) for _ in range(40)]
        threads = runtime_module.PROMPT_THREADS
        await eventually(
            lambda: tokenizer.reading, 60, f"{threads} prompts being read", satisfied=lambda n: n == threads
        )
        # Forty prompts being tokenized leave the shared pool (the store's reader's) free.
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 5) == "free"
        assert tokenizer.most_at_once == threads
        tokenizer.release.set()
        answers = await asyncio.gather(*counting)
        assert {answer.status for answer in answers} == {200}
        read = tokenizer.read
        long = {"messages": [{"role": "user", "content": "x" * 11}]}
        refused = await runtime.send(count, b"", long, {})
        assert refused.status == 400 and tokenizer.read == read  # refused by its length, never tokenized
        body = json.loads(b"".join([chunk async for chunk in refused.chunks()]))
        assert "the setting inference.max-prompt-chars" in body["error"]["message"]
    finally:
        tokenizer.release.set()
        await runtime.close()
