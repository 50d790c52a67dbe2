"""The jail's model socket: the trial's own model calls pass through whole, streams too; any other route, method or
scenario is refused at the socket and stores nothing, whatever the daemon's auth setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from reef_contract import RECEIPT_HEADER, SCENARIO_HEADER, TRIAL_SCENARIO
from reef_daemon.harness.jail import model_socket
from tests.support.reef_testing import CHAT, SCENARIO, Reef, StartReef

JAIL = "http://jail"  # the host is not looked at: the connector always dials the socket


async def test_the_trial_scenarios_model_calls_stream_through_the_socket(reef: Reef, tmp_path: Path) -> None:
    async with (
        model_socket(tmp_path, reef.url, TRIAL_SCENARIO) as path,
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path))) as jail,
    ):
        async with jail.post(f"{JAIL}/v1/chat/completions", json={**CHAT, "stream": True}) as answer:
            assert answer.status == 200 and answer.content_type == "text/event-stream"
            streamed = await answer.read()
        headers = {SCENARIO_HEADER: TRIAL_SCENARIO}
        async with jail.post(f"{JAIL}/v1/chat/completions", json=CHAT, headers=headers) as answer:
            assert answer.status == 200
            receipt = answer.headers[RECEIPT_HEADER]
            assert (await answer.json())["choices"][0]["message"]["content"]
    assert streamed.rstrip().endswith(b"data: [DONE]")
    rows = await reef.records(scenario=TRIAL_SCENARIO)
    assert len(rows) == 2 and all(row["complete"] for row in rows) and receipt in [row["id"] for row in rows]


REFUSED: list[tuple[str, str, Any, str | None, int]] = [
    ("GET", f"/reef/records?scenario={SCENARIO}", None, None, 404),
    ("POST", "/reef/scenarios", {"name": "made-in-the-jail"}, None, 404),
    ("POST", "/reef/report", {"score": -100}, SCENARIO, 404),
    ("GET", "/reef/status", None, None, 404),
    ("POST", "/v1/chat/completions/", CHAT, None, 404),
    ("GET", "/v1/chat/completions", None, None, 405),
    ("POST", "/v1/chat/completions", CHAT, SCENARIO, 403),
    ("POST", "/v1/messages", CHAT, "", 403),
]


@pytest.mark.parametrize("token", [None, "socket-test-token"], ids=["auth-off", "auth-on"])
async def test_everything_else_is_refused_at_the_socket_and_stores_nothing(
    start_reef: StartReef, tmp_path: Path, token: str | None
) -> None:
    reef = await start_reef(environ={"REEF_TOKEN": token} if token else {})
    owner = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        model_socket(tmp_path, reef.url, TRIAL_SCENARIO) as path,
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path)), headers=owner) as jail,
    ):
        for method, route, body, scenario, status in REFUSED:
            headers = {SCENARIO_HEADER: scenario} if scenario is not None else {}
            async with jail.request(method, JAIL + route, json=body, headers=headers) as answer:
                assert answer.status == status, (method, route, scenario)
                assert (await answer.json())["error"]["message"]
    assert reef.upstream.received == []
    listed = await reef.get("/reef/records", headers=owner)
    assert (await listed.json())["records"] == []
    scenarios = await reef.get("/reef/scenarios", headers=owner)
    assert (await scenarios.json())["scenarios"] == []


async def test_with_a_token_the_socket_presents_it_in_place_of_the_agents(
    start_reef: StartReef, tmp_path: Path
) -> None:
    reef = await start_reef(environ={"REEF_TOKEN": "socket-test-token"})
    async with (
        model_socket(tmp_path, reef.url, TRIAL_SCENARIO, token="socket-test-token") as path,
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path))) as jail,
    ):
        for credential in ({}, {"Authorization": "Bearer forged"}, {"x-api-key": "forged"}):
            async with jail.post(f"{JAIL}/v1/chat/completions", json=CHAT, headers=credential) as answer:
                assert answer.status == 200, credential
    owner = {"Authorization": "Bearer socket-test-token"}
    listed = await reef.get(f"/reef/records?scenario={TRIAL_SCENARIO}", headers=owner)
    assert len((await listed.json())["records"]) == 3
