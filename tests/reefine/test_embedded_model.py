"""A change request against the real embedded model runs to a settled state, whatever the small model answers,
and its progress shows each phase; with the agent proposer, within its wall bound."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from reef_daemon.app import create_app
from reef_daemon.context import DAEMON
from reef_daemon.settings import load_settings
from tests.support.fixtures import FindAgent
from tests.support.waiting import eventually

WALL_S = 60


async def test_a_request_settles_on_the_embedded_model(embedded_models: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "models").symlink_to(embedded_models, target_is_directory=True)
    settings = load_settings(
        overrides={"recipe": "reefine", "reef.state-dir": str(state), "harness.max-tokens": "48"}, environ={}
    )
    server = TestServer(create_app(settings), host="127.0.0.1")
    await server.start_server()
    base = str(server.make_url("")).rstrip("/")
    headers = {"x-reef-scenario": "my-harness"}
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{base}/reef/scenarios", json={"name": "my-harness"}) as created:
                assert created.status == 201
            text = "When I ask you to fix a bug, reproduce it with a failing test first."
            async with session.post(f"{base}/reef/train", json={"text": text}, headers=headers) as filed:
                assert filed.status == 202, await filed.text()
                request_id = (await filed.json())["agent_record_id"]

            async def progress_now() -> dict[str, object]:
                async with session.get(f"{base}/reef/requests/{request_id}", headers=headers) as answer:
                    shown: dict[str, object] = await answer.json()
                    return shown

            progress = await eventually(
                progress_now, 300, "the request to settle", satisfied=lambda now: now["state"] == "settled"
            )
            assert progress["result"] in ("selected", "pending", "rejected", "skipped")
            lines = " ".join(str(item) for item in progress["activity"])  # type: ignore[attr-defined]
            assert "plan" in lines and "attempt 1" in lines and "decided" in lines
            async with session.get(f"{base}/reef/status") as status:
                body = await status.json()
            assert body["errors"] == [] and body["recipe"]["answer_tokens"] == 48
    finally:
        await server.close()


async def test_the_embedded_model_writes_short_proposer_answers_unless_told_otherwise(
    embedded_models: Path, tmp_path: Path
) -> None:
    """At tens of tokens a second, 8192-token answers would keep a request busy for most of an hour."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "models").symlink_to(embedded_models, target_is_directory=True)
    settings = load_settings(overrides={"recipe": "reefine", "reef.state-dir": str(state)}, environ={})
    server = TestServer(create_app(settings), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session, session.get(str(server.make_url("/reef/status"))) as status:
            assert (await status.json())["recipe"]["answer_tokens"] == 512
    finally:
        await server.close()


async def test_the_agent_proposer_settles_within_its_wall_bound_on_the_embedded_model(
    embedded_models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent_cli: FindAgent
) -> None:
    pi = agent_cli("pi")
    monkeypatch.setenv("PATH", os.pathsep.join([str(pi.parent), os.environ["PATH"]]))
    state = tmp_path / "state"
    state.mkdir()
    (state / "models").symlink_to(embedded_models, target_is_directory=True)
    overrides = {"recipe": "reefine", "reef.state-dir": str(state), "harness.max-tokens": "48"}
    settings = load_settings(overrides={**overrides, "harness.proposer-wall-s": str(WALL_S)}, environ={})
    server = TestServer(create_app(settings), host="127.0.0.1")
    await server.start_server()
    server.app[DAEMON].listening(server.port)
    base = str(server.make_url("")).rstrip("/")
    headers = {"x-reef-scenario": "my-harness"}
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{base}/reef/scenarios", json={"name": "my-harness"}) as created:
                assert created.status == 201
            text = "When I ask you to fix a bug, reproduce it with a failing test first."
            async with session.post(f"{base}/reef/train", json={"text": text}, headers=headers) as filed:
                request_id = (await filed.json())["agent_record_id"]

            async def progress_now() -> dict[str, Any]:
                async with session.get(f"{base}/reef/requests/{request_id}", headers=headers) as answer:
                    shown: dict[str, Any] = await answer.json()
                    return shown

            started = time.monotonic()
            progress = await eventually(
                progress_now, WALL_S + 240, "the request to settle", satisfied=lambda now: now["state"] == "settled"
            )
            assert progress["result"] in ("selected", "pending", "rejected", "skipped")
            lines = [str(item["text"]) for item in progress["activity"]]
            assert any(line.startswith("proposer: the agent proposer: pi") for line in lines), lines
            stopped = next(line for line in lines if line.startswith("agent stopped after"))
            assert float(stopped.split()[3]) <= WALL_S + 5
            assert any(line.startswith("decided:") for line in lines)
            assert time.monotonic() - started < WALL_S + 240
    finally:
        await server.close()
