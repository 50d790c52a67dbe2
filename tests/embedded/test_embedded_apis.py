"""The real model answers through the openai and anthropic SDKs, streaming and not, and every answer leaves a
record with its receipt, token ids, log-probs and weight versions.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import openai
import pytest

from reef_daemon.runtimes.embedded import worker
from tests.support.embedded_running import QUESTION, SCENARIO, RunningReef, assert_token_data

HEADERS = {"x-reef-scenario": SCENARIO}
MESSAGES: list[Any] = [{"role": "user", "content": QUESTION}]
GREEDY = {"temperature": 0}
MAX_TOKENS = 12


@pytest.fixture(scope="module")
def oai(reef: RunningReef) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{reef.url}/v1", api_key="unused", default_headers=HEADERS) as client:
        yield client


@pytest.fixture(scope="module")
def ant(reef: RunningReef) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=reef.url, api_key="unused", default_headers=HEADERS) as client:
        yield client


def check_record(reef: RunningReef, receipt: str, route: str) -> None:
    record = reef.record(receipt)
    assert record["route"] == route and record["complete"] is True
    tokens = assert_token_data(record)
    assert record["usage"] == {"input_tokens": len(tokens["prompt_ids"]), "output_tokens": len(tokens["output_ids"])}


def test_the_readme_question_gets_a_short_right_answer_under_the_defaults(reef: RunningReef) -> None:
    """README.md's first request sets no sampling and no limit: the defaults answer it briefly, and say so."""
    readme = {"model": "smollm2", "messages": MESSAGES}
    response = httpx.post(f"{reef.url}/v1/chat/completions", headers=HEADERS, json=readme, timeout=120)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert "Paris" in choice["message"]["content"] and choice["finish_reason"] == "stop"
    assert response.json()["usage"]["completion_tokens"] < 40
    defaults = reef.runtime.sampling_defaults
    sampling = reef.record(response.headers["x-reef-agent-record-id"])["tokens"]["sampling"]
    assert sampling == {
        "temperature": defaults.temperature,
        "top_p": defaults.top_p,
        "max_tokens": defaults.max_tokens,
        "seed": None,
        "defaulted": ["temperature", "top_p", "max_tokens"],
    }


def test_chat_completion(reef: RunningReef, oai: openai.OpenAI) -> None:
    raw = oai.chat.completions.with_raw_response.create(
        model="smollm2", messages=MESSAGES, max_tokens=MAX_TOKENS, **GREEDY
    )
    answer = raw.parse()
    assert "Paris" in (answer.choices[0].message.content or "")
    assert answer.usage is not None and answer.usage.completion_tokens <= MAX_TOKENS
    check_record(reef, raw.headers["x-reef-agent-record-id"], "/v1/chat/completions")


def test_chat_completion_stream_with_content_parts(reef: RunningReef, oai: openai.OpenAI) -> None:
    parts: list[Any] = [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    stream = oai.chat.completions.create(
        model="smollm2",
        messages=parts,
        max_tokens=MAX_TOKENS,
        stream=True,
        stream_options={"include_usage": True},
        **GREEDY,
    )
    text, receipt = "", None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        receipt = (chunk.model_extra or {}).get("reef", {}).get("agent_record_id", receipt)
    assert "Paris" in text
    assert receipt is not None
    check_record(reef, receipt, "/v1/chat/completions")


def test_a_chat_stream_that_asks_no_usage_still_records_its_token_counts(reef: RunningReef, oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="smollm2", messages=MESSAGES, max_tokens=MAX_TOKENS, stream=True, **GREEDY
    )
    chunks = list(stream)
    assert all(chunk.usage is None for chunk in chunks)  # the client gets what it asked for: no usage chunk
    receipt = next(r for c in chunks if (r := (c.model_extra or {}).get("reef", {}).get("agent_record_id")))
    check_record(reef, receipt, "/v1/chat/completions")  # counted from the model's own token ids


def test_responses(reef: RunningReef, oai: openai.OpenAI) -> None:
    raw = oai.responses.with_raw_response.create(
        model="smollm2", input=QUESTION, max_output_tokens=MAX_TOKENS, **GREEDY
    )
    assert "Paris" in raw.parse().output_text
    check_record(reef, raw.headers["x-reef-agent-record-id"], "/v1/responses")


def test_responses_stream(reef: RunningReef, oai: openai.OpenAI) -> None:
    items: Any = [{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}]
    events = oai.responses.create(model="smollm2", input=items, max_output_tokens=MAX_TOKENS, stream=True, **GREEDY)
    text, receipt = "", None
    for event in events:
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type == "response.completed":
            receipt = (event.model_extra or {})["reef"]["agent_record_id"]
    assert "Paris" in text
    assert receipt is not None
    check_record(reef, receipt, "/v1/responses")


def test_responses_stream_helper(reef: RunningReef, oai: openai.OpenAI) -> None:
    """The SDK's stream helper needs each event in order (content_part.added before the text deltas)."""
    with oai.responses.stream(model="smollm2", input=QUESTION, max_output_tokens=MAX_TOKENS, **GREEDY) as stream:
        final = stream.get_final_response()
    assert "Paris" in final.output_text


def test_messages(reef: RunningReef, ant: anthropic.Anthropic) -> None:
    raw = ant.messages.with_raw_response.create(
        model="smollm2", max_tokens=MAX_TOKENS, messages=MESSAGES, extra_body=GREEDY
    )
    message = raw.parse()
    assert "Paris" in "".join(block.text for block in message.content if block.type == "text")
    assert message.stop_reason in ("end_turn", "max_tokens")
    check_record(reef, raw.headers["x-reef-agent-record-id"], "/v1/messages")


def test_messages_stream(reef: RunningReef, ant: anthropic.Anthropic) -> None:
    events = ant.messages.create(
        model="smollm2", max_tokens=MAX_TOKENS, messages=MESSAGES, extra_body=GREEDY, stream=True
    )
    text, receipt = "", None
    for event in events:
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            text += event.delta.text
        if event.type == "message_stop":
            receipt = (event.model_extra or {})["reef"]["agent_record_id"]
    assert "Paris" in text
    assert receipt is not None
    check_record(reef, receipt, "/v1/messages")


def test_count_tokens_matches_the_prompt(reef: RunningReef, ant: anthropic.Anthropic) -> None:
    counted = ant.messages.count_tokens(model="smollm2", messages=MESSAGES)
    raw = ant.messages.with_raw_response.create(model="smollm2", max_tokens=1, messages=MESSAGES)
    assert counted.input_tokens == raw.parse().usage.input_tokens


def test_a_system_turn_inside_messages_joins_the_system_prompt(reef: RunningReef, ant: anthropic.Anthropic) -> None:
    """Claude Code sends its agent types as a `system` turn after the user's: the API takes it, as Anthropic's does."""
    agents = "Available agent types: general."
    sent: Any = [*MESSAGES, {"role": "system", "content": agents}]
    raw = ant.messages.with_raw_response.create(
        model="smollm2", max_tokens=MAX_TOKENS, system="Answer briefly.", messages=sent, extra_body=GREEDY
    )
    assert "Paris" in "".join(block.text for block in raw.parse().content if block.type == "text")
    check_record(reef, raw.headers["x-reef-agent-record-id"], "/v1/messages")
    folded = ant.messages.count_tokens(model="smollm2", system=f"Answer briefly.\n\n{agents}", messages=MESSAGES)
    assert ant.messages.count_tokens(model="smollm2", system="Answer briefly.", messages=sent) == folded


def test_a_refused_request_is_recorded_as_the_embedded_models_answer(reef: RunningReef) -> None:
    """No upstream is set: the record says the embedded model refused, and why."""
    headers = {"x-reef-scenario": "refused"}
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "tool", "content": "hi"}]}
    response = httpx.post(f"{reef.url}/v1/messages", headers=headers, json=body, timeout=60)
    assert response.status_code == 400
    (record,) = reef.records("refused")
    assert (
        reef.record(record["id"])["error"]
        == "the embedded model answered 400: messages[0].role must be user, assistant or system"
    )


def test_stop_sequence_ends_the_answer(reef: RunningReef, oai: openai.OpenAI) -> None:
    """The answer's record ends with the token that completed the stop sequence, though greedy tokens are decoded
    several to a native call (the one after it, " is", was decoded in the same call)."""
    raw = oai.chat.completions.with_raw_response.create(
        model="smollm2", messages=MESSAGES, max_tokens=MAX_TOKENS, stop=[" France"], **GREEDY
    )
    answer = raw.parse()
    assert answer.choices[0].message.content == "The capital of"
    assert answer.choices[0].finish_reason == "stop"
    output_ids = assert_token_data(reef.record(raw.headers["x-reef-agent-record-id"]))["output_ids"]
    assert reef.runtime.engine.tokenizer.decode(output_ids) == "The capital of France"


def test_a_long_shared_prompt_prefix_gives_the_same_answer(reef: RunningReef, oai: openai.OpenAI) -> None:
    """The second request starts from the first one's context (the prefix cache); greedy answers must agree.

    Log-probs may differ slightly: a position read in a multi-token step uses the fp32 weights, a single-token
    step their fp16 copies (see runtimes/embedded/precision.py).
    """
    system = {"role": "system", "content": "You answer questions about geography. " * 60}
    receipts = []
    for question in (QUESTION, QUESTION):
        raw = oai.chat.completions.with_raw_response.create(
            model="smollm2", messages=[system, {"role": "user", "content": question}], max_tokens=8, **GREEDY
        )
        receipts.append(raw.headers["x-reef-agent-record-id"])
    first, second = (assert_token_data(reef.record(receipt)) for receipt in receipts)
    assert len(first["prompt_ids"]) > 300
    assert first["output_ids"] == second["output_ids"]
    assert max(abs(a - b) for a, b in zip(first["logprobs"], second["logprobs"], strict=True)) < 0.05


def test_the_same_prompt_again_reads_nothing_and_answers_as_alone(reef: RunningReef, oai: openai.OpenAI) -> None:
    """Four answers sampled for one prompt at once: one reads the prompt, the others start from its kept cache and
    logits, and each gets the tokens and log-probs a request alone gets (a fresh prompt, read whole)."""
    messages = [{"role": "user", "content": "Name one animal that lives in the sea."}]

    def answer(_: int) -> str:
        raw = oai.chat.completions.with_raw_response.create(model="smollm2", messages=messages, max_tokens=8, **GREEDY)
        return raw.headers["x-reef-agent-record-id"]

    def counts() -> tuple[int, int]:
        runtime = httpx.get(f"{reef.url}/reef/status").json()["runtime"]
        return runtime["prompt_tokens_read"], runtime["prompt_tokens_reused"]

    read, reused = counts()
    alone = assert_token_data(reef.record(answer(0)))
    prompt = len(alone["prompt_ids"])
    assert counts() == (read + prompt, reused)
    with ThreadPoolExecutor(4) as pool:
        together = [assert_token_data(reef.record(receipt)) for receipt in pool.map(answer, range(4))]
    assert counts() == (read + prompt, reused + 4 * prompt)
    for tokens in together:
        assert tokens["output_ids"] == alone["output_ids"] and tokens["logprobs"] == alone["logprobs"]


def test_requests_that_arrive_while_their_prompt_is_read_start_with_it(
    reef: RunningReef, oai: openai.OpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four requests for one new prompt, the last three arriving while the first one's prompt is read: they read
    nothing and join the batch with it, so all four decode from the same step on."""
    messages: Any = [{"role": "user", "content": "Name one bird that cannot fly."}]
    submitted: list[object] = []
    all_in, joins = threading.Event(), []
    submit, read_turn, join = (
        worker.GenerationWorker.submit,
        worker.GenerationWorker._read_turn,
        worker.GenerationWorker._join,
    )

    def counted_submit(self: Any, job: Any) -> None:
        submit(self, job)
        submitted.append(job)
        if len(submitted) == 4:
            all_in.set()

    def read_as_the_others_arrive(self: Any) -> None:
        if self._reading and self._reading[0] is submitted[0] and not all_in.is_set():
            assert all_in.wait(timeout=120)
        read_turn(self)

    def counted_join(self: Any) -> None:
        if self._joining:
            joins.append(len(self._joining))
        join(self)

    monkeypatch.setattr(worker.GenerationWorker, "submit", counted_submit)
    monkeypatch.setattr(worker.GenerationWorker, "_read_turn", read_as_the_others_arrive)
    monkeypatch.setattr(worker.GenerationWorker, "_join", counted_join)

    def answer(_: int) -> list[int]:
        raw = oai.chat.completions.with_raw_response.create(model="smollm2", messages=messages, max_tokens=8, **GREEDY)
        return assert_token_data(reef.record(raw.headers["x-reef-agent-record-id"]))["output_ids"]

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(answer, range(4)))
    assert joins == [4]
    assert all(tokens == answers[0] for tokens in answers)


def test_bad_request_is_answered_in_the_api_shape(reef: RunningReef) -> None:
    response = httpx.post(
        f"{reef.url}/v1/messages", headers=HEADERS, json={"model": "m", "max_tokens": 0, "messages": MESSAGES}
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_status_shows_the_model(reef: RunningReef) -> None:
    answered = httpx.post(
        f"{reef.url}/v1/messages", headers=HEADERS, json={"model": "m", "max_tokens": 3, "messages": MESSAGES},
        timeout=120,
    )  # fmt: skip
    assert answered.status_code == 200  # decoded: its speed is in the status
    runtime = httpx.get(f"{reef.url}/reef/status").json()["runtime"]
    assert runtime["kind"] == "embedded" and runtime["model"] == "SmolLM2-135M-Instruct"
    assert runtime["engine"] == "torch"
    assert runtime["decoding"].startswith("int4 for 210 of 211 weights, int8 for the rest, reef kernel (")
    assert runtime["parameters"] > 100_000_000
    assert runtime["weight_version"].endswith(":0")
    assert runtime["tokens_per_second"] > 0
    defaults = reef.runtime.sampling_defaults
    assert runtime["sampling"] == {
        "temperature": defaults.temperature, "top_p": defaults.top_p, "max_tokens": defaults.max_tokens,
        "max_answer_tokens": defaults.max_answer_tokens, "max_answer_s": defaults.max_answer_s,
        "repeat_stop_tokens": defaults.repeat_stop_tokens,
    }  # fmt: skip


def test_a_stream_s_first_token_comes_alone_and_the_text_after_it_together(
    reef: RunningReef, oai: openai.OpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between its first token and its end, a stream's text is sent several tokens to a frame (at most every
    STREAM_INTERVAL_S); here the interval outlasts the answer, so the rest comes in one frame with the end."""
    monkeypatch.setattr(worker, "STREAM_INTERVAL_S", 3600.0)
    counting: Any = [{"role": "user", "content": "Count from 1 to 100, separated by commas."}]
    chunks = oai.chat.completions.create(model="smollm2", messages=counting, max_tokens=48, stream=True, **GREEDY)
    frames, receipt = [], ""
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            frames.append(chunk.choices[0].delta.content)
        receipt = (chunk.model_extra or {}).get("reef", {}).get("agent_record_id", receipt)
    whole = oai.chat.completions.create(model="smollm2", messages=counting, max_tokens=48, **GREEDY)
    output_ids = assert_token_data(reef.record(receipt))["output_ids"]
    assert len(output_ids) == 48 and len(frames) == 2
    assert frames[0] == reef.runtime.engine.tokenizer.decode(output_ids[:1])
    assert "".join(frames) == whole.choices[0].message.content


def test_a_late_stream_starts_before_an_early_one_ends(reef: RunningReef, oai: openai.OpenAI) -> None:
    """A request that arrives while another streams gets its first token before the first one ends."""
    counting: Any = [{"role": "user", "content": "Count from 1 to 100, separated by commas."}]
    first_started = threading.Event()

    def stream(signal: threading.Event | None) -> str:
        chunks = oai.chat.completions.create(model="smollm2", messages=counting, max_tokens=48, stream=True, **GREEDY)
        receipt = ""
        for chunk in chunks:
            if signal is not None and chunk.choices and chunk.choices[0].delta.content:
                signal.set()
            receipt = (chunk.model_extra or {}).get("reef", {}).get("agent_record_id", receipt)
        return receipt

    with ThreadPoolExecutor(2) as pool:
        early = pool.submit(stream, first_started)
        assert first_started.wait(timeout=120)
        late = pool.submit(stream, None)
        early_record, late_record = reef.record(early.result()), reef.record(late.result())
    early_end = early_record["created_at"] + early_record["timings"]["duration_ms"] / 1000
    late_first_token = late_record["created_at"] + late_record["timings"]["ttft_ms"] / 1000
    assert late_first_token < early_end


USER = [{"role": "user", "content": "hi"}]
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("/v1/chat/completions", {"messages": USER, "seed": 2**63}, "seed must be a whole number from "),
    ("/v1/chat/completions", {"messages": USER, "seed": -(2**63) - 1}, "seed must be a whole number from "),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": "f"}]}, *USER]},
        "messages[0].tool_calls[0].function must be an object",
    ),
    ("/v1/chat/completions", {"messages": [{"role": {"a": 1}, "content": "hi"}]}, "messages[0].role must be one of"),
    ("/v1/responses", {"input": [{"type": "message", "role": {}, "content": "hi"}]}, "input[0].role must be one of"),
    ("/v1/responses", {"input": [{"role": ["user"], "content": "hi"}]}, "input[0].role must be one of"),
    (
        "/v1/chat/completions",
        {"messages": USER, "stop": [f"stop {n}" for n in range(17)]},
        "stop has 17 stop sequences; the embedded model takes at most 16 (the setting inference.max-stop-sequences)",
    ),
    (
        "/v1/messages",
        {"max_tokens": 5, "messages": USER, "stop_sequences": ["x" * 501]},
        "stop_sequences[0] has 501 characters; a stop sequence has at most 500 (the setting inference.max-stop-chars)",
    ),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "x" * 1_000_001}]},
        "the prompt has 1000001 characters; the embedded model takes at most 1000000 "
        "(the setting inference.max-prompt-chars)",
    ),
    (
        "/v1/messages/count_tokens",
        {"messages": [{"role": "user", "content": "x" * 1_000_001}]},
        "the prompt has 1000001 characters",
    ),
]


@pytest.mark.parametrize(("route", "body", "message"), REFUSED, ids=[m[:30] for _, _, m in REFUSED])
def test_a_request_the_model_cannot_take_is_a_400_that_says_why(
    reef: RunningReef, route: str, body: dict[str, Any], message: str
) -> None:
    response = httpx.post(f"{reef.url}{route}", headers=HEADERS, json={"model": "m", **body}, timeout=60)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"].startswith(message)
