"""The real openai and anthropic SDKs through reef: answers intact, receipts found, records stored, reports taken."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from tests.support.reef_testing import SCENARIO, Reef

QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."
FINISH_REASON = {"/v1/chat/completions": "stop", "/v1/messages": "end_turn", "/v1/responses": "completed"}


def openai_client(reef: Reef) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=reef.url + "/v1",
        api_key="client-key",
        default_headers={"x-reef-scenario": SCENARIO},
        max_retries=0,
    )


def anthropic_client(reef: Reef) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=reef.url, api_key="client-key", default_headers={"x-reef-scenario": SCENARIO}, max_retries=0
    )


async def assert_recorded_and_scorable(reef: Reef, receipt: str, route: str, *, stream: bool) -> dict[str, Any]:
    assert len(receipt) == 32 and int(receipt, 16) >= 0
    record = await reef.record(receipt)
    assert record["scenario"] == SCENARIO
    assert record["type"] == "inference"
    assert record["route"] == route
    assert record["status"] == 200
    assert record["complete"] is True
    assert record["model"] == "fake-model"
    assert record["usage"] == {"input_tokens": 12, "output_tokens": 7}
    assert record["timings"]["duration_ms"] >= record["timings"]["overhead_ms"] >= 0
    assert QUESTION in str(record["request"])
    assert record["answer"] == {
        "model": "fake-model",
        "parts": [{"type": "text", "text": ANSWER}],
        "finish_reason": FINISH_REASON[route],
        "usage": {"input_tokens": 12, "output_tokens": 7},
    }
    if stream:
        assert record["response"]["stream"] is True
        assert record["timings"]["ttft_ms"] is not None
    else:
        assert ANSWER in str(record["response"])

    response = await reef.post("/reef/report", {"score": 0.75, "feedback": "right", "references": [receipt]})
    assert response.status == 200, await response.text()
    body = await response.json()
    assert body["scenario"] == SCENARIO and body["request_type"] == "report"
    scored = await reef.record(receipt)
    assert scored["score"] == 0.75
    assert [report["id"] for report in scored["reports"]] == [body["agent_record_id"]]
    assert scored["reports"][0]["feedback"] == "right"
    return record


async def test_openai_chat_completion(reef: Reef) -> None:
    async with openai_client(reef) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="fake-model", messages=[{"role": "user", "content": QUESTION}]
        )
    completion = raw.parse()
    assert completion.choices[0].message.content == ANSWER
    assert float(raw.headers["x-reef-overhead-ms"]) >= 0
    await assert_recorded_and_scorable(
        reef, raw.headers["x-reef-agent-record-id"], "/v1/chat/completions", stream=False
    )


async def test_openai_chat_completion_stream(reef: Reef) -> None:
    text, receipts = "", []
    async with openai_client(reef) as client:
        stream = await client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": QUESTION}], stream=True
        )
        async for chunk in stream:
            assert chunk.usage is None  # not asked for: reef asked for the record, and keeps it from the client
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            extra = chunk.model_extra or {}
            if "reef" in extra:
                receipts.append(extra["reef"]["agent_record_id"])
                assert chunk.choices == [] and chunk.id == "chatcmpl-fake"
    assert text == ANSWER
    assert len(receipts) == 1
    await assert_recorded_and_scorable(reef, receipts[0], "/v1/chat/completions", stream=True)


async def test_openai_chat_completion_stream_that_asks_for_usage(reef: Reef) -> None:
    usage: list[tuple[int, int, int]] = []
    receipts: list[str] = []
    async with openai_client(reef) as client:
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": QUESTION}],
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            if chunk.usage is not None:
                usage.append((chunk.usage.prompt_tokens, chunk.usage.completion_tokens, len(chunk.choices)))
            extra = chunk.model_extra or {}
            if "reef" in extra:
                receipts.append(extra["reef"]["agent_record_id"])
    assert usage == [(12, 7, 0)]  # one chunk, with no choices
    assert len(receipts) == 1
    await assert_recorded_and_scorable(reef, receipts[0], "/v1/chat/completions", stream=True)


async def test_openai_responses(reef: Reef) -> None:
    async with openai_client(reef) as client:
        raw = await client.responses.with_raw_response.create(model="fake-model", input=QUESTION)
    assert raw.parse().output_text == ANSWER
    await assert_recorded_and_scorable(reef, raw.headers["x-reef-agent-record-id"], "/v1/responses", stream=False)


async def test_openai_responses_stream(reef: Reef) -> None:
    async with openai_client(reef) as client:
        text, receipts = "", []
        async for event in await client.responses.create(model="fake-model", input=QUESTION, stream=True):
            if event.type == "response.output_text.delta":
                text += event.delta
            if event.type == "response.completed":
                receipts.append((event.model_extra or {})["reef"]["agent_record_id"])
        async with client.responses.stream(model="fake-model", input=QUESTION) as helper:
            final = await helper.get_final_response()
    assert text == ANSWER and final.output_text == ANSWER
    assert len(receipts) == 1
    await assert_recorded_and_scorable(reef, receipts[0], "/v1/responses", stream=True)


async def test_anthropic_messages(reef: Reef) -> None:
    async with anthropic_client(reef) as client:
        raw = await client.messages.with_raw_response.create(
            model="fake-model", max_tokens=32, messages=[{"role": "user", "content": QUESTION}]
        )
    message = await raw.parse()
    assert message.content[0].text == ANSWER  # type: ignore[union-attr]
    await assert_recorded_and_scorable(reef, raw.headers["x-reef-agent-record-id"], "/v1/messages", stream=False)


async def test_anthropic_messages_stream(reef: Reef) -> None:
    receipts, raw_text = [], ""
    messages: Any = [{"role": "user", "content": QUESTION}]
    async with anthropic_client(reef) as client:
        async for event in await client.messages.create(
            model="fake-model", max_tokens=32, messages=messages, stream=True
        ):
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                raw_text += event.delta.text
            if event.type == "message_stop":
                receipts.append((event.model_extra or {})["reef"]["agent_record_id"])
        async with client.messages.stream(model="fake-model", max_tokens=32, messages=messages) as helper:
            final = await helper.get_final_message()
    text = "".join(part.text for part in final.content if part.type == "text")
    assert raw_text == ANSWER
    assert text == ANSWER
    assert len(receipts) == 1
    await assert_recorded_and_scorable(reef, receipts[0], "/v1/messages", stream=True)


async def test_anthropic_count_tokens_is_recorded(reef: Reef) -> None:
    async with anthropic_client(reef) as client:
        raw = await client.messages.with_raw_response.count_tokens(
            model="fake-model", messages=[{"role": "user", "content": QUESTION}]
        )
    assert (await raw.parse()).input_tokens == 12
    record = await reef.record(raw.headers["x-reef-agent-record-id"])
    assert record["route"] == "/v1/messages/count_tokens"
    assert record["usage"]["input_tokens"] == 12


async def test_upstream_receives_the_body_unchanged_and_tags_are_kept(reef: Reef) -> None:
    body = b'{"model":"fake-model",  "messages":[{"role":"user","content":"hi"}], "custom": [1, 2.50]}'
    response = await reef.post(
        "/v1/chat/completions",
        data=body,
        headers={
            "x-reef-tag-session": " s-42 ",
            "anthropic-beta": "tools-1",
            "content-type": "application/json",
        },
    )
    assert response.status == 200
    forwarded = reef.upstream.received[-1]
    assert forwarded.body == body
    assert forwarded.headers["anthropic-beta"] == "tools-1"
    assert not any(name.lower().startswith("x-reef-") for name in forwarded.headers)
    record = await reef.record(response.headers["x-reef-agent-record-id"])
    assert record["tags"] == {"session": "s-42"}
