"""Auth: tokens required everywhere but /healthz, in both header forms; the token never leaves reef."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.reef_testing import CHAT, SCENARIO, Reef, StartReef

TOKEN = "reef-secret-token-7f3a"


@pytest.fixture
async def guarded(start_reef: StartReef) -> Reef:
    return await start_reef(environ={"REEF_TOKEN": TOKEN})


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": "Bearer "},
        {"Authorization": TOKEN},
        {"x-api-key": "wrong"},
        {"Authorization": "Bearer wrong", "x-api-key": TOKEN},
    ],
)
async def test_requests_without_the_token_are_refused(guarded: Reef, headers: dict[str, str]) -> None:
    for method, path in [
        ("POST", "/v1/chat/completions"),
        ("GET", "/reef/records"),
        ("GET", "/reef/status"),
        ("POST", "/reef/report"),
        ("GET", "/reef/events"),
    ]:
        response = await guarded.session.request(
            method, guarded.url + path, json=CHAT, headers={"x-reef-scenario": "demo", **headers}
        )
        assert response.status == 401, path
        error = (await response.json())["error"]
        assert error["type"] == "unauthorized" and "REEF_TOKEN" in error["message"]
    assert guarded.upstream.received == []


async def test_healthz_is_open(guarded: Reef) -> None:
    response = await guarded.get("/healthz")
    assert response.status == 200 and await response.json() == {"ok": True}


@pytest.mark.sqlite_file
@pytest.mark.parametrize(
    "headers",
    [{"Authorization": f"Bearer {TOKEN}"}, {"Authorization": f"bearer {TOKEN}"}, {"x-api-key": TOKEN}],
)
async def test_token_accepted_and_never_forwarded_or_stored(guarded: Reef, headers: dict[str, str]) -> None:
    response = await guarded.post("/v1/chat/completions", CHAT, headers=headers)
    assert response.status == 200
    forwarded = guarded.upstream.received[-1]
    assert TOKEN not in str(forwarded.headers) and TOKEN.encode() not in forwarded.body
    record = await guarded.session.get(
        f"{guarded.url}/reef/records/{response.headers['x-reef-agent-record-id']}", headers=headers
    )
    assert TOKEN not in await record.text()
    database = Path(guarded.daemon.store.engine.path)
    for path in database.parent.iterdir():
        assert TOKEN.encode() not in path.read_bytes(), path


async def test_upstream_key_replaces_client_auth(start_reef: StartReef) -> None:
    reef = await start_reef(environ={"REEF_TOKEN": TOKEN, "REEF_UPSTREAM_API_KEY": "sk-upstream"})
    await reef.post("/v1/chat/completions", CHAT, headers={"Authorization": f"Bearer {TOKEN}"})
    assert reef.upstream.received[-1].headers["Authorization"] == "Bearer sk-upstream"
    await reef.post("/v1/messages", CHAT, headers={"x-api-key": TOKEN})
    sent = reef.upstream.received[-1].headers
    assert sent["x-api-key"] == "sk-upstream" and sent["anthropic-version"]
    assert "Authorization" not in sent


async def test_without_a_token_the_clients_own_key_goes_upstream(reef: Reef) -> None:
    await reef.post("/v1/chat/completions", CHAT, headers={"Authorization": "Bearer sk-client"})
    assert reef.upstream.received[-1].headers["Authorization"] == "Bearer sk-client"


async def test_rotation_accepts_every_listed_token(start_reef: StartReef) -> None:
    reef = await start_reef(reef__tokens='["old-token", "new-token"]')
    for token in ("old-token", "new-token"):
        response = await reef.get("/reef/status", headers={"Authorization": f"Bearer {token}"})
        assert response.status == 200
    assert (await reef.get("/reef/status")).status == 401


async def test_a_lent_token_is_good_for_model_calls_only_and_only_while_lent(guarded: Reef) -> None:
    gate = guarded.daemon.gate
    with gate.lend(SCENARIO) as lent:
        assert lent is not None and lent != TOKEN
        headers = {"Authorization": f"Bearer {lent}"}
        assert (await guarded.post("/v1/chat/completions", CHAT, headers=headers)).status == 200
        assert (await guarded.session.get(guarded.url + "/reef/records", headers=headers)).status == 401
        assert (await guarded.session.get(guarded.url + "/reef/status", headers=headers)).status == 401
    assert (await guarded.post("/v1/chat/completions", CHAT, headers=headers)).status == 401


async def test_a_lent_token_makes_no_record_outside_the_scenario_it_was_lent_for(guarded: Reef) -> None:
    with guarded.daemon.gate.lend(SCENARIO) as lent:
        headers = {"Authorization": f"Bearer {lent}"}
        for scenario in ("elsewhere", f" {SCENARIO}x", None):
            answer = await guarded.post("/v1/chat/completions", CHAT, scenario=scenario, headers=headers)
            assert answer.status == 401, scenario
        assert (await guarded.post("/v1/chat/completions", CHAT, headers=headers)).status == 200
    assert len(guarded.upstream.received) == 1
    owner = {"Authorization": f"Bearer {TOKEN}"}
    listed = await guarded.session.get(guarded.url + "/reef/scenarios", headers=owner)
    assert [row["scenario"] for row in (await listed.json())["scenarios"]] == [SCENARIO]


async def test_nothing_is_lent_when_auth_is_off(start_reef: StartReef) -> None:
    open_reef = await start_reef()
    with open_reef.daemon.gate.lend(SCENARIO) as lent:
        assert lent is None
