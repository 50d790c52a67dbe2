"""The `sglang` engine against a fake SGLang server (SGLang's native HTTP contract, real tokens from the embedded
model): reef serves chat completions, Responses and Messages through it, streaming and not, records token ids,
log-probs and versions, and swaps weights into it between tokens without refusing a request.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from aiohttp.test_utils import TestServer
from rich.console import Console
from safetensors.torch import load_file

from reef_cli.render.status import status_view
from reef_daemon.app import create_app
from reef_daemon.context import DAEMON
from reef_daemon.runtimes.embedded import EmbeddedRuntime
from reef_daemon.settings import load_settings
from tests.support.embedded_running import QUESTION, SCENARIO, assert_token_data
from tests.support.fake_sglang import FakeSglang, model_folder
from tests.support.waiting import eventually

HEADERS = {"x-reef-scenario": SCENARIO}
STORY = "Write a long story about a lighthouse keeper and the sea."


@dataclass
class SglangReef:
    fake: FakeSglang
    client: httpx.AsyncClient
    runtime: EmbeddedRuntime
    folder: Path
    state: Path
    fake_url: str

    async def record(self, receipt: str) -> dict[str, Any]:
        response = await self.client.get(f"/reef/records/{receipt}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def chat(self, content: str = QUESTION, **params: Any) -> tuple[httpx.Response, dict[str, Any]]:
        body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 8, **params}
        response = await self.client.post("/v1/chat/completions", json=body, headers=HEADERS)
        assert response.status_code == 200, response.text
        return response, await self.record(response.headers["x-reef-agent-record-id"])


StartSglangReef = Callable[..., Awaitable[SglangReef]]


@pytest.fixture
async def start_reef(
    embedded_models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[StartSglangReef]:
    """A fake SGLang server, and a daemon whose embedded runtime attaches to it (`embedded.engine = sglang`). The
    ledger of weight version numbers is this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = model_folder(embedded_models)
    started: list[tuple[TestServer, TestServer, httpx.AsyncClient]] = []

    async def start(incremental: bool = False) -> SglangReef:
        fake = FakeSglang(folder, incremental=incremental)
        fake_server = TestServer(fake.app(), host="127.0.0.1")
        await fake_server.start_server()
        fake_url = str(fake_server.make_url("")).rstrip("/")
        settings = load_settings(
            overrides={
                "reef.state-dir": str(tmp_path / "state"),
                "embedded.engine": "sglang",
                "embedded.sglang-url": fake_url,
                "inference.model-path": str(folder),
            },
            environ={},
        )
        server = TestServer(create_app(settings), host="127.0.0.1")
        await server.start_server()
        client = httpx.AsyncClient(base_url=str(server.make_url("")).rstrip("/"), timeout=120)
        started.append((fake_server, server, client))
        runtime = server.app[DAEMON].runtime
        assert isinstance(runtime, EmbeddedRuntime)
        return SglangReef(fake, client, runtime, folder, tmp_path / "state", fake_url)

    yield start
    for fake_server, server, client in started:
        await client.aclose()
        await server.close()
        await fake_server.close()


def receipt_of(headers: httpx.Headers, content: bytes) -> str:
    """The record id of an answer: its header, or for a stream the `reef.agent_record_id` of a frame."""
    if "x-reef-agent-record-id" in headers:
        return headers["x-reef-agent-record-id"]
    found = re.search(rb'"agent_record_id":\s*"([^"]+)"', content)
    assert found, content[-500:]
    return found.group(1).decode()


def versions_of(record: dict[str, Any]) -> list[str]:
    return list(record["tokens"]["versions"])


@pytest.mark.parametrize("incremental", [False, True], ids=["cumulative-events", "incremental-events"])
async def test_chat_through_sglang_records_the_servers_tokens(start_reef: StartSglangReef, incremental: bool) -> None:
    """Prompt ids come from the model's chat template and go to /generate as input_ids; the answer, its ids,
    log-probs and versions are what the server generated, whichever streaming mode it runs."""
    reef = await start_reef(incremental)
    response, record = await reef.chat(temperature=0)
    tokens = assert_token_data(record)
    sent = reef.fake.generate_bodies[-1]
    assert sent["input_ids"] == tokens["prompt_ids"] and sent["return_logprob"] is True and sent["stream"] is True
    assert sent["sampling_params"]["temperature"] == 0 and sent["sampling_params"]["max_new_tokens"] == 8
    assert [version for _, version in reef.fake.tokens()] == ["default"] * len(tokens["output_ids"])
    version = reef.runtime.weight_version
    assert version.endswith(":0") and set(versions_of(record)) == {version}
    text = response.json()["choices"][0]["message"]["content"]
    assert text and text == reef.runtime.engine.tokenizer.decode(tokens["output_ids"], skip_special_tokens=True)


async def test_the_four_routes_stream_and_not(start_reef: StartSglangReef) -> None:
    """Chat completions, Responses and Messages answer in their own shapes, streaming and not; count_tokens counts
    the rendered prompt; every answer leaves a record with the server's token data."""
    reef = await start_reef()
    asks = {
        "/v1/chat/completions": {"model": "m", "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 6},
        "/v1/responses": {"model": "m", "input": QUESTION, "max_output_tokens": 6},
        "/v1/messages": {"model": "m", "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 6},
    }
    for route, body in asks.items():
        for stream in (False, True):
            response = await reef.client.post(route, json={**body, "stream": stream, "temperature": 0}, headers=HEADERS)
            assert response.status_code == 200, response.text
            if stream:
                assert response.headers["content-type"].startswith("text/event-stream")
                assert b"data:" in response.content
            else:
                answer = response.json()
                assert answer.get("object") in ("chat.completion", "response") or answer.get("type") == "message"
            record = await reef.record(receipt_of(response.headers, response.content))
            assert record["route"] == route and record["complete"] is True
            assert_token_data(record)
    count_body = {"model": "m", "messages": [{"role": "user", "content": QUESTION}]}
    counted = await reef.client.post("/v1/messages/count_tokens", json=count_body, headers=HEADERS)
    assert counted.status_code == 200
    assert counted.json()["input_tokens"] == len(reef.fake.generate_bodies[-1]["input_ids"])


async def test_status_shows_the_sglang_engine(start_reef: StartSglangReef) -> None:
    reef = await start_reef()
    status = (await reef.client.get("/reef/status")).json()
    runtime = status["runtime"]
    assert runtime["kind"] == "embedded" and runtime["engine"] == "sglang"
    assert runtime["weight_version"] == reef.runtime.weight_version and runtime["model"] == reef.folder.name
    console = Console(record=True, width=200)
    console.print(status_view(status, "http://reef"))
    line = next(line for line in console.export_text().splitlines() if line.startswith("runtime"))
    assert f"embedded (sglang engine) at {runtime['url']}" in line


async def test_new_weights_are_loaded_from_disk_and_the_next_answer_carries_their_version(
    start_reef: StartSglangReef,
) -> None:
    reef = await start_reef()
    old = reef.runtime.weight_version
    norm = load_file(str(reef.folder / "model.safetensors"))["model.norm.weight"]
    new = await reef.runtime.swap_weights({"model.norm.weight": norm * 1.5})
    assert new != old and new.rsplit(":", 1) == [old.rsplit(":", 1)[0], "1"]
    controls = [entry for entry in reef.fake.log if entry[0] != "token"]
    assert controls == [("pause", "retract"), ("update", new, True), ("continue",)]
    assert torch.equal(reef.fake.model.model.norm.weight.detach(), norm * 1.5)
    served = reef.runtime.weights_dir
    assert served != reef.folder and torch.equal(
        load_file(str(served / "model.safetensors"))["model.norm.weight"], norm * 1.5
    )
    _, record = await reef.chat(temperature=0)
    assert set(versions_of(record)) == {new} and record["release"] == new
    assert (await reef.client.get("/reef/status")).json()["runtime"]["weight_version"] == new


async def test_a_swap_under_concurrent_streams_pauses_between_tokens_and_refuses_nothing(
    start_reef: StartSglangReef,
) -> None:
    """Three streams decode while weights are loaded: the server pauses (retract), loads, continues; no token is
    generated in between, each stream's tokens are old-version then new-version, and every request completes."""
    reef = await start_reef()
    old = reef.runtime.weight_version
    norm = load_file(str(reef.folder / "model.safetensors"))["model.norm.weight"]
    body = {"model": "m", "messages": [{"role": "user", "content": STORY}], "max_tokens": 40, "temperature": 0}

    async def ask(seed: int) -> dict[str, Any]:
        async with reef.client.stream(
            "POST", "/v1/chat/completions", json={**body, "seed": seed, "stream": True}, headers=HEADERS
        ) as response:
            assert response.status_code == 200
            content = b"".join([chunk async for chunk in response.aiter_bytes()])
        return await reef.record(receipt_of(response.headers, content))

    asks = [asyncio.create_task(ask(seed)) for seed in range(3)]
    await eventually(
        lambda: asyncio.sleep(0, {rid for rid, _ in reef.fake.tokens()}),
        120,
        "every stream to have generated a token",
        satisfied=lambda requests: len(requests) == 3,
    )
    new = await reef.runtime.swap_weights({"model.norm.weight": norm * 1.5})
    records = await asyncio.gather(*asks)

    log = reef.fake.log
    paused, resumed = log.index(("pause", "retract")), log.index(("continue",))
    assert log[paused + 1 : resumed] == [("update", new, True)]  # nothing generated while paused
    assert {entry[2] for entry in log[:paused] if entry[0] == "token"} == {"default"}
    assert {entry[2] for entry in log[resumed:] if entry[0] == "token"} == {new}
    for record in records:
        versions = versions_of(record)
        assert record["complete"] is True and versions
        assert versions == sorted(versions, key=lambda version: version != old)  # old ones first, then new
        assert set(versions) <= {old, new}
    assert any(len(set(versions_of(record))) == 2 for record in records), "no stream straddled the swap"


async def test_a_refused_sync_keeps_serving_the_old_version(start_reef: StartSglangReef) -> None:
    reef = await start_reef()
    old = reef.runtime.weight_version
    norm = load_file(str(reef.folder / "model.safetensors"))["model.norm.weight"]
    reef.fake.refuse_updates = "out of GPU memory"
    with pytest.raises(RuntimeError, match=f"out of GPU memory.*still serving {old}"):
        await reef.runtime.swap_weights({"model.norm.weight": norm * 1.5})
    assert reef.runtime.weight_version == old and reef.runtime.weights_dir == reef.folder
    controls = [entry[0] for entry in reef.fake.log if entry[0] != "token"]
    assert controls == ["pause", "update", "continue"] and not reef.fake.paused
    assert not any((reef.state / "sglang-weights").glob("*")), "the refused folder was left behind"
    _, record = await reef.chat(temperature=0)
    assert set(versions_of(record)) == {old}


async def test_an_unknown_weight_name_is_refused_before_the_server_is_paused(start_reef: StartSglangReef) -> None:
    reef = await start_reef()
    with pytest.raises(KeyError, match=r"no\.such\.weight"):
        await reef.runtime.swap_weights({"no.such.weight": torch.zeros(3)})
    assert [entry for entry in reef.fake.log if entry[0] != "token"] == []


async def test_a_request_the_server_aborts_ends_as_an_error_not_a_hang(start_reef: StartSglangReef) -> None:
    """Slime pauses its engines with `abort` before pushing weights: the request ends, and the client is told."""
    reef = await start_reef()
    body = {"model": "m", "messages": [{"role": "user", "content": STORY}], "max_tokens": 40, "temperature": 0}
    asking = asyncio.create_task(reef.client.post("/v1/chat/completions", json=body, headers=HEADERS))
    await eventually(lambda: asyncio.sleep(0, reef.fake.tokens()), 120, "a token to be generated", satisfied=bool)
    async with httpx.AsyncClient(base_url=reef.fake_url) as control:
        assert (await control.post("/pause_generation", json={})).status_code == 200  # mode: abort (the default)
        assert (await control.post("/continue_generation", json={})).status_code == 200
    response = await asking
    assert response.status_code >= 500
    assert "SGLang ended the request" in response.text
