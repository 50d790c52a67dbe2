"""A change request against the real embedded model runs to a settled state, whatever the small model answers,
and its progress shows each phase."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestServer

from reef_daemon.app import create_app
from reef_daemon.settings import load_settings
from tests.support.waiting import eventually


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
