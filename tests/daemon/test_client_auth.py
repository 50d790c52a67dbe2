"""inference.client-auth=pass: a client's own key goes upstream unchanged, reef's token (in x-reef-token) never."""

from __future__ import annotations

from pathlib import Path

import anthropic
import openai
import pytest
from rich.console import Console

from reef_cli.render.status import status_view
from tests.support.reef_testing import CHAT, SCENARIO, Reef, StartReef

TOKEN = "reef-secret-token-7f3a"
OWN_KEY = "sk-person-own-key-91c2"


@pytest.fixture
async def passing(start_reef: StartReef) -> Reef:
    return await start_reef(environ={"REEF_TOKEN": TOKEN}, inference__client_auth="pass")


def _headers(**extra: str) -> dict[str, str]:
    return {"x-reef-scenario": SCENARIO, **extra}


def _nowhere_under(folder: Path, secret: str) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


@pytest.mark.sqlite_file
async def test_an_sdk_clients_own_key_goes_upstream_and_reefs_token_does_not(passing: Reef, tmp_path: Path) -> None:
    async with anthropic.AsyncAnthropic(
        base_url=passing.url, api_key=OWN_KEY, default_headers=_headers(**{"x-reef-token": TOKEN}), max_retries=0
    ) as client:
        raw = await client.messages.with_raw_response.create(
            model="fake-model", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
    sent = {name.lower(): value for name, value in passing.upstream.received[-1].headers.items()}
    assert OWN_KEY in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))
    assert TOKEN not in str(sent) and "x-reef-token" not in sent
    record = await passing.get(
        f"/reef/records/{raw.headers['x-reef-agent-record-id']}", headers={"x-reef-token": TOKEN}
    )
    assert record.status == 200 and OWN_KEY not in await record.text()
    _nowhere_under(tmp_path / "state", OWN_KEY)

    async with openai.AsyncOpenAI(
        base_url=passing.url + "/v1", api_key=OWN_KEY, default_headers=_headers(**{"x-reef-token": TOKEN}),
        max_retries=0,
    ) as bearer:  # fmt: skip
        await bearer.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "hi"}])
    sent = {name.lower(): value for name, value in passing.upstream.received[-1].headers.items()}
    assert sent["authorization"] == f"Bearer {OWN_KEY}"


async def test_without_reefs_token_in_its_header_the_request_is_refused(passing: Reef) -> None:
    response = await passing.post("/v1/chat/completions", CHAT, headers={"Authorization": f"Bearer {OWN_KEY}"})
    assert response.status == 401
    assert "x-reef-token" in (await response.json())["error"]["message"]
    assert passing.upstream.received == []


async def test_reefs_token_as_the_bearer_is_still_reefs_and_stays_here(passing: Reef) -> None:
    response = await passing.post("/v1/chat/completions", CHAT, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status == 200
    sent = passing.upstream.received[-1].headers
    assert "Authorization" not in sent and TOKEN not in str(sent)


async def test_reefs_token_sent_as_the_clients_own_credential_is_refused(passing: Reef) -> None:
    response = await passing.post("/v1/messages", CHAT, headers={"x-reef-token": TOKEN, "x-api-key": TOKEN})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["type"] == "reef_token_as_credential" and "x-reef-token" in error["message"]
    assert passing.upstream.received == []


async def test_the_clients_credential_wins_over_the_upstream_key(start_reef: StartReef) -> None:
    reef = await start_reef(
        environ={"REEF_TOKEN": TOKEN, "REEF_UPSTREAM_API_KEY": "sk-upstream"}, inference__client_auth="pass"
    )
    await reef.post("/v1/messages", CHAT, headers={"x-reef-token": TOKEN, "Authorization": f"Bearer {OWN_KEY}"})
    sent = reef.upstream.received[-1].headers
    assert sent["Authorization"] == f"Bearer {OWN_KEY}" and "x-api-key" not in sent
    await reef.post("/v1/messages", CHAT, headers={"x-reef-token": TOKEN})
    assert reef.upstream.received[-1].headers["x-api-key"] == "sk-upstream"


async def test_the_default_never_forwards_a_clients_key_and_status_says_which(start_reef: StartReef) -> None:
    reef = await start_reef(environ={"REEF_TOKEN": TOKEN})
    await reef.post("/v1/messages", CHAT, headers={"x-reef-token": TOKEN, "x-api-key": OWN_KEY})
    assert OWN_KEY not in str(reef.upstream.received[-1].headers)
    status = await (await reef.get("/reef/status", headers={"x-reef-token": TOKEN})).json()
    assert status["client_auth"] == "reef"
    assert "a client's own credential is not forwarded" in _shown(status)


async def test_status_says_whose_credential_goes_upstream_in_pass_mode(passing: Reef) -> None:
    status = await (await passing.get("/reef/status", headers={"x-reef-token": TOKEN})).json()
    assert "upstream login the client's own (client-auth pass; reef's token in x-reef-token)" in _shown(status)


def _shown(status: dict[str, object]) -> str:
    """`reef status` as a person reads it, its lines joined."""
    console = Console(record=True, width=200)
    console.print(status_view(status, "http://reef"))  # type: ignore[arg-type]
    return " ".join(console.export_text().split())
