"""Input an adversary sends: deep or out-of-range JSON, refused reports, odd ids and long names. Each gets a 4xx that
says what is wrong (never a 5xx), and a refused request stores nothing, not even its scenario."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from reef_daemon.proxy import handler
from tests.support.reef_testing import CHAT, Reef, StartReef

JSON_ROUTES = ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/reef/report", "/reef/scenarios"]


async def error_type(response: object, status: int = 400) -> str:
    assert hasattr(response, "status") and hasattr(response, "json")
    assert response.status == status, await response.text()  # type: ignore[attr-defined]
    body = await response.json()
    return str(body["error"]["type"])


async def stored_nothing(reef: Reef) -> None:
    assert await reef.records() == []
    assert (await (await reef.get("/reef/scenarios")).json())["scenarios"] == []


@pytest.mark.parametrize("path", JSON_ROUTES)
async def test_deeply_nested_json_is_a_400(reef: Reef, path: str) -> None:
    response = await reef.post(path, data=b"[" * 100_000)
    assert await error_type(response) == "invalid_json"
    assert "nested too deeply" in (await response.json())["error"]["message"]
    await stored_nothing(reef)


@pytest.mark.parametrize("path", JSON_ROUTES)
async def test_text_with_a_lone_surrogate_is_a_400_that_says_where(reef: Reef, path: str) -> None:
    response = await reef.post(path, data=b'{"model": "m", "messages": [{"role": "user", "content": "hi \\ud800"}]}')
    assert await error_type(response) == "invalid_json"
    assert "messages[0].content: holds a lone surrogate" in (await response.json())["error"]["message"]
    await stored_nothing(reef)


@pytest.mark.parametrize("path", JSON_ROUTES[:3])
async def test_a_body_in_utf16_is_a_400_that_asks_for_utf8(reef: Reef, path: str) -> None:
    response = await reef.post(path, data='{"model": "m", "messages": []}'.encode("utf-16"))
    assert await error_type(response) == "invalid_json"
    assert "not UTF-8 text" in (await response.json())["error"]["message"]
    await stored_nothing(reef)


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"9" * 400])
async def test_a_score_out_of_range_is_refused(reef: Reef, number: bytes) -> None:
    response = await reef.post("/reef/report", data=b'{"score": ' + number + b', "feedback": "x"}')
    assert await error_type(response) in ("invalid_json", "invalid_report")
    await stored_nothing(reef)
    assert (await reef.get("/reef/records")).status == 200


async def test_a_refused_report_creates_no_scenario(reef: Reef) -> None:
    response = await reef.post("/reef/report", {"score": 1, "references": ["0" * 32]}, scenario="fresh")
    assert await error_type(response) == "unknown_reference"
    await stored_nothing(reef)
    accepted = await reef.post("/reef/report", {"score": 1}, scenario="fresh")
    assert accepted.status == 200
    names = [row["scenario"] for row in (await (await reef.get("/reef/scenarios")).json())["scenarios"]]
    assert names == ["fresh"]


@pytest.mark.parametrize("last", ["99999999999999999999999", "-1", "x"])
async def test_an_event_id_out_of_range_is_a_400_before_the_stream(reef: Reef, last: str) -> None:
    response = await reef.get("/reef/events", headers={"Last-Event-ID": last})
    assert await error_type(response) == "invalid_query"


async def test_records_and_events_of_an_archived_long_named_scenario(reef: Reef) -> None:
    name = "s" * 128
    assert (await reef.post("/v1/chat/completions", CHAT, scenario=name)).status == 200
    archived = await (await reef.session.delete(f"{reef.url}/reef/scenarios/{name}")).json()
    archived_as = archived["archived_as"]
    assert len(archived_as) > 128
    rows = await reef.records(scenario=archived_as)
    assert [row["scenario"] for row in rows] == [archived_as]
    async with reef.session.get(f"{reef.url}/reef/events", params={"scenario": archived_as, "after": "0"}) as events:
        assert events.status == 200
        assert b"event: record" in await events.content.readuntil(b"event: record")


@pytest.mark.parametrize("when", ["before its stream starts", "once it is connected"])
async def test_a_subscriber_that_leaves_is_not_an_error(
    reef: Reef, caplog: pytest.LogCaptureFixture, when: str
) -> None:
    caplog.set_level(logging.INFO)
    assert reef.server.runner is not None
    reef.server.runner.server.handler_cancellation = False  # as under `reef serve`
    host, port = reef.url.removeprefix("http://").split(":")
    subscribers = reef.daemon.bus._subscribers  # the only way to see a subscription end
    own = set(subscribers)  # the daemon's own (the canary watch follows reports)
    for _ in range(3):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"GET /reef/events HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        if when == "once it is connected":
            await reader.readuntil(b": connected\n\n")
        writer.transport.abort()
    for _ in range(50):  # events until every client's subscription has noticed its client left
        assert (await reef.post("/reef/report", {"score": 1})).status == 200
        if subscribers == own:
            break
    assert subscribers == own
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert errors == [], [record.getMessage() for record in errors]


@pytest.mark.parametrize("bad_id", ["a/b", "../../etc/x", "line\nbreak", "..", ".hidden", "x" * 129, "sp ace"])
async def test_a_change_request_id_that_would_not_route_is_refused(start_reef: StartReef, bad_id: str) -> None:
    reef = await start_reef(recipe="reefine", harness__trial="off")
    assert (await reef.post("/reef/scenarios", {"name": "demo", "training_mode": "manual"})).status == 201
    response = await reef.post("/reef/train", {"text": "make it brief", "agent_record_id": bad_id})
    assert await error_type(response) in ("invalid_agent_record_id",)
    assert await reef.records(type="train") == []


async def test_a_failure_after_an_event_stream_began_ends_it_in_protocol(
    reef: Reef, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_args: object) -> list[object]:
        raise RuntimeError("the replay broke")

    monkeypatch.setattr(reef.daemon.store.events, "after", broken)
    response = await reef.get("/reef/events", headers={"Last-Event-ID": "0"})
    assert response.status == 200
    text = (await asyncio.wait_for(response.read(), 20)).decode()  # the stream ends
    assert "HTTP/1.1" not in text and '"type":"internal_error"' in text.replace(" ", "")


async def test_a_tag_header_that_is_not_utf8_is_a_400_naming_it(reef: Reef) -> None:
    body = json.dumps(CHAT).encode()
    host, port = reef.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: reef\r\nContent-Type: application/json\r\n"
        b"x-reef-scenario: demo\r\nx-reef-tag-team: caf\xe9\r\nConnection: close\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    answer = await reader.read()
    writer.close()
    head, _, text = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer
    error = json.loads(text)["error"]
    assert error["type"] == "invalid_header" and "x-reef-tag-team" in error["message"]
    await stored_nothing(reef)
    assert (await reef.post("/v1/chat/completions", CHAT, headers={"x-reef-tag-team": "café"})).status == 200
    (row,) = await reef.records()
    assert (await reef.record(row["id"]))["tags"] == {"team": "café"}


async def test_a_record_stored_with_a_tag_that_is_not_utf8_is_still_served(
    reef: Reef, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store written before such tags were refused holds the server's decoding of the byte: a lone surrogate.
    monkeypatch.setattr(handler, "tags_from", lambda _headers: {"team": "caf\udce9"})
    assert (await reef.post("/v1/chat/completions", CHAT)).status == 200
    (row,) = await reef.records()
    shown = await reef.get(f"/reef/records/{row['id']}")
    assert shown.status == 200, await shown.text()
    assert (await shown.json())["tags"]["team"].startswith("caf")
