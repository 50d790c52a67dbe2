"""`GET /reef/events`: live record, report and scenario events, resumable with Last-Event-ID."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from tests.support.reef_testing import CHAT, Reef


async def read_events(response: aiohttp.ClientResponse, count: int) -> list[dict[str, Any]]:
    """The next `count` events of an SSE response, as (event, id, data) checked for consistency."""
    events: list[dict[str, Any]] = []
    frame: dict[str, str] = {}
    async with asyncio.timeout(10):
        while len(events) < count:
            line = (await response.content.readline()).decode().rstrip("\n")
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                frame[name] = value
                continue
            if frame:
                data = json.loads(frame["data"])
                assert data["type"] == frame["event"] and str(data["sequence"]) == frame["id"]
                events.append(data)
                frame = {}
    return events


async def test_live_events_then_resume(reef: Reef) -> None:
    live = await reef.get("/reef/events")
    assert live.headers["Content-Type"].startswith("text/event-stream")
    first = await reef.post("/v1/chat/completions", CHAT)
    receipt = first.headers["x-reef-agent-record-id"]
    await reef.post("/reef/report", {"score": 0.5, "references": [receipt]})

    scenario_event, record_event, report_event = await read_events(live, 3)
    live.close()
    assert scenario_event["type"] == "scenario" and scenario_event["object"]["scenario"] == "demo"
    assert record_event["type"] == "record" and record_event["record"]["id"] == receipt
    assert record_event["record"]["usage"]["output_tokens"] == 7
    assert report_event["type"] == "report" and report_event["references"] == [receipt]
    assert report_event["score"] == 0.5
    assert scenario_event["sequence"] < record_event["sequence"] < report_event["sequence"]

    # While nobody watches, more happens; a client resuming from the record event gets exactly what followed.
    second = await reef.post("/v1/chat/completions", CHAT)
    resumed = await reef.get("/reef/events", headers={"Last-Event-ID": str(record_event["sequence"])})
    replayed = await read_events(resumed, 2)
    assert [e["type"] for e in replayed] == ["report", "record"]
    assert replayed[1]["record"]["id"] == second.headers["x-reef-agent-record-id"]
    third = await reef.post("/v1/chat/completions", CHAT)
    (live_again,) = await read_events(resumed, 1)  # and then it goes on live
    assert live_again["record"]["id"] == third.headers["x-reef-agent-record-id"]
    resumed.close()


async def test_events_filtered_by_scenario(reef: Reef) -> None:
    watching = await reef.get("/reef/events", params={"scenario": "beta"})
    await reef.post("/v1/chat/completions", CHAT, scenario="alpha")
    beta = await reef.post("/v1/chat/completions", CHAT, scenario="beta")
    events = await read_events(watching, 2)
    watching.close()
    assert {e["scenario"] for e in events} == {"beta"}
    assert events[1]["record"]["id"] == beta.headers["x-reef-agent-record-id"]


async def test_bad_last_event_id(reef: Reef) -> None:
    response = await reef.get("/reef/events", headers={"Last-Event-ID": "yesterday"})
    assert response.status == 400
