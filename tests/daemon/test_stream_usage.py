"""Token counts of chat streams whose client did not ask for usage: reef asks the upstream for them, records them,
and relays the stream the client asked for; an upstream that refuses the option is asked again without it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from reef_daemon.runtimes.stream_usage import usage_asked
from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import CHAT, Reef, StartReef

ROUTE = "/v1/chat/completions"
STREAM = {**CHAT, "stream": True}
COUNTED = {"input_tokens": 12, "output_tokens": 7}


async def streamed(reef: Reef, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The chunks the client got (`[DONE]` left out) and the receipt among them."""
    response = await reef.post(ROUTE, body)
    assert response.status == 200, await response.text()
    text = (await response.read()).decode()
    assert text.endswith("data: [DONE]\n\n")
    chunks = [json.loads(data) for data in re.findall(r"^data: (.*)$", text, re.M) if data != "[DONE]"]
    receipts = [chunk["reef"]["agent_record_id"] for chunk in chunks if "reef" in chunk]
    assert len(receipts) == 1 and "reef" in chunks[-1]  # the receipt comes last, right before [DONE]
    return chunks, receipts[0]


def answered(chunks: list[dict[str, Any]]) -> str:
    return "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks if chunk["choices"])


async def test_a_stream_that_asks_no_usage_is_recorded_with_its_token_counts(reef: Reef) -> None:
    chunks, receipt = await streamed(reef, STREAM)
    assert answered(chunks) == "The capital of France is Paris."
    assert all("usage" not in chunk for chunk in chunks)  # neither the usage chunk nor `"usage": null` reaches it
    assert len(chunks) == 7 + 2 + 1  # the words, the role and finish chunks, the receipt
    sent = json.loads(reef.upstream.received[-1].body)
    assert sent["stream_options"] == {"include_usage": True}
    record = await reef.record(receipt)
    assert record["complete"] is True and record["usage"] == COUNTED and record["answer"]["usage"] == COUNTED
    assert "stream_options" not in record["request"]  # the request as the client sent it


async def test_a_client_that_asks_for_usage_gets_it_and_its_body_goes_upstream_unchanged(reef: Reef) -> None:
    body = {**STREAM, "stream_options": {"include_usage": True}}
    chunks, receipt = await streamed(reef, body)
    assert [chunk["usage"] for chunk in chunks if chunk["choices"] == [] and "reef" not in chunk] == [
        {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
    ]
    assert json.loads(reef.upstream.received[-1].body) == body
    assert (await reef.record(receipt))["usage"] == COUNTED


async def test_an_upstream_that_refuses_stream_options_is_asked_without_them_from_then_on(
    start_reef: StartReef,
) -> None:
    reef = await start_reef(FakeUpstream(fault="no-stream-options"))
    for _ in range(2):
        chunks, receipt = await streamed(reef, STREAM)
        assert answered(chunks) == "The capital of France is Paris."
        record = await reef.record(receipt)
        assert record["status"] == 200 and record["complete"] is True and record["error"] is None
        assert record["usage"] == {"input_tokens": None, "output_tokens": None}  # this upstream reports none
    asked = ["stream_options" in json.loads(each.body) for each in reef.upstream.received]
    assert asked == [True, False, False]  # one refusal, then never asked again
    assert len(await reef.records()) == 2  # the refusal is no record of its own

    # A client that asks for the option itself hears the upstream's refusal, as without reef.
    response = await reef.post(ROUTE, {**STREAM, "stream_options": {"include_usage": True}})
    assert response.status == 400 and "stream_options" in await response.text()


@pytest.mark.parametrize("fault", ["400", "429"])
async def test_a_refusal_that_is_not_about_the_option_is_relayed_and_recorded(reef: Reef, fault: str) -> None:
    response = await reef.post(ROUTE, STREAM, headers={"x-fake-fault": fault})
    assert response.status == int(fault)
    said = (await response.json())["error"]["message"]
    assert said in ("the prompt is too long", "slow down, retry in 1s")
    assert len(reef.upstream.received) == 1  # not asked again
    (row,) = await reef.records()
    record = await reef.record(str(row["id"]))
    assert record["status"] == int(fault) and said in str(record["error"])
    chunks, _ = await streamed(reef, STREAM)  # and the option is still asked for
    assert all("usage" not in chunk for chunk in chunks)
    assert "stream_options" in json.loads(reef.upstream.received[-1].body)


BODY = {"model": "m", "stream": True, "messages": []}


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (BODY, {**BODY, "stream_options": {"include_usage": True}}),
        ({**BODY, "stream_options": None}, {**BODY, "stream_options": {"include_usage": True}}),
        (
            {**BODY, "stream_options": {"include_usage": False, "x": 1}},
            {**BODY, "stream_options": {"include_usage": True, "x": 1}},
        ),
        ({**BODY, "stream_options": {"include_usage": True}}, None),  # asked by the client
        ({**BODY, "stream_options": "yes"}, None),  # wrong: the upstream says so
        ({**BODY, "stream": False}, None),
    ],
)
def test_which_bodies_reef_asks_the_usage_for(payload: dict[str, Any], expected: dict[str, Any] | None) -> None:
    asked = usage_asked(ROUTE, json.dumps(payload).encode(), payload)
    assert (asked if asked is None else json.loads(asked)) == expected


def test_the_option_is_added_without_touching_the_clients_bytes() -> None:
    rest = b'"model": "m",  "stream": true, "n": 123456789012345678901234567890}'
    asked = usage_asked(ROUTE, b" \n{" + rest, json.loads(b"{" + rest))
    assert asked == b' \n{"stream_options":{"include_usage":true},' + rest
    assert usage_asked("/v1/messages", b"{" + rest, json.loads(b"{" + rest)) is None
