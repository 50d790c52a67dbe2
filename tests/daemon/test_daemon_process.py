"""`reef serve` as a real process: start banner, live config reload, clean Ctrl-C, and no lost receipt on kill -9."""

from __future__ import annotations

import asyncio
import signal
import socket
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tests.support.daemon_process import DaemonProcess
from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import CHAT
from tests.support.waiting import eventually


@pytest.fixture
async def upstream() -> AsyncIterator[str]:
    server = TestServer(FakeUpstream(delay_ms=2).app(), host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("")).rstrip("/")
    await server.close()


async def test_banner_reload_and_clean_shutdown(tmp_path: Path, upstream: str) -> None:
    config = tmp_path / "reef.toml"
    state = tmp_path / "state"
    config.write_text(
        f'[reef]\nstate-dir = "{state}"\ntoken = "first-token"\n[inference]\nupstream-url = "{upstream}"\n'
    )
    daemon = DaemonProcess(config, tmp_path / "reef.log")
    async with aiohttp.ClientSession() as session:
        await daemon.ready(session)
        banner = daemon.output()
        assert f"listening on {daemon.url}" in banner
        assert "recipe:    record" in banner and f"http (model chosen by each client) at {upstream}" in banner
        assert str(state) in banner and "auth:      on" in banner
        assert "first-token" not in banner

        async def status_with(token: str) -> int:
            async with session.get(
                daemon.url + "/reef/status", headers={"Authorization": f"Bearer {token}"}
            ) as response:
                return response.status

        async def accepts_second_token() -> bool:
            return await status_with("second-token") == 200

        assert await status_with("first-token") == 200
        config.write_text(
            config.read_text().replace("first-token", "second-token").replace("[reef]\n", "[reef]\nmax-body-mb = 8\n")
        )
        await eventually(accepts_second_token, 60, "the new token to be accepted")
        assert await status_with("first-token") == 401
        await eventually(lambda: "restart reef to apply" in daemon.output(), 60, "the restart notice")
        assert "reef.max-body-mb" in daemon.output() and "second-token" not in daemon.output()

        # Ctrl-C during a slow stream: the stream finishes with its receipt, then the daemon exits cleanly.
        headers = {
            "Authorization": "Bearer second-token",
            "x-reef-scenario": "demo",
            "x-fake-delay-ms": "100",
        }
        async with session.post(
            daemon.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers
        ) as response:
            first = await response.content.readany()
            assert first
            daemon.process.send_signal(signal.SIGINT)
            body = first + await response.read()
        assert b"agent_record_id" in body and body.rstrip().endswith(b"data: [DONE]")
    assert daemon.stop() == 0
    assert "reef: stopped" in daemon.output()
    with sqlite3.connect(state / "reef.sqlite3") as db:
        assert db.execute("SELECT complete FROM records WHERE type = 'inference'").fetchall() == [(1,)]


async def test_kill_9_under_load_loses_no_receipt(tmp_path: Path, upstream: str) -> None:
    config = tmp_path / "reef.yaml"
    state = tmp_path / "state"
    config.write_text(f"reef:\n  state-dir: {state}\ninference:\n  upstream-url: {upstream}\n")
    daemon = DaemonProcess(config, tmp_path / "reef.log")
    receipts: list[str] = []
    stop = asyncio.Event()

    async def client(session: aiohttp.ClientSession, number: int) -> None:
        stream = number % 2 == 0
        while not stop.is_set():
            try:
                async with session.post(
                    daemon.url + "/v1/chat/completions",
                    json={**CHAT, "stream": stream},
                    headers={"x-reef-scenario": f"load-{number % 3}"},
                ) as response:
                    if not stream:
                        receipts.append(response.headers["x-reef-agent-record-id"])
                        continue
                    body = await response.read()
                    marker = b'"agent_record_id":"'
                    if marker in body:
                        start = body.index(marker) + len(marker)
                        receipts.append(body[start : start + 32].decode())
            except (TimeoutError, aiohttp.ClientError):
                return

    async with aiohttp.ClientSession() as session:
        await daemon.ready(session)
        workers = [asyncio.create_task(client(session, n)) for n in range(16)]
        await eventually(lambda: len(receipts) >= 300, 120, "300 receipts under load")
        daemon.process.kill()  # kill -9 while requests are in flight
        daemon.stop()
        stop.set()
        await asyncio.gather(*workers)

    assert len(receipts) >= 300
    restarted = DaemonProcess(config, tmp_path / "reef.log")
    async with aiohttp.ClientSession() as session:
        await restarted.ready(session)
    restarted.stop()
    with sqlite3.connect(state / "reef.sqlite3") as db:
        stored = {row[0] for row in db.execute("SELECT id FROM records")}
    missing = [r for r in receipts if r not in stored]
    assert missing == [], f"{len(missing)} of {len(receipts)} acknowledged records were lost"


def test_a_busy_port_is_reported_before_anything_is_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reef_daemon import serve
    from reef_daemon.setting_kinds import SettingsError
    from reef_daemon.settings import load_settings

    def loads_the_model(*_args: object) -> None:
        raise AssertionError("the daemon was built although its port is taken")

    monkeypatch.setattr(serve, "create_app", loads_the_model)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        settings = load_settings(overrides={"reef.port": port, "reef.state-dir": str(tmp_path)}, environ={})
        with pytest.raises(
            SettingsError, match=f"cannot listen on 127.0.0.1:{port}: .*choose another with --reef.port"
        ):
            serve.run(settings)


async def test_a_second_daemon_on_the_same_sqlite_file_refuses_to_start_naming_the_first(
    tmp_path: Path, upstream: str
) -> None:
    database = tmp_path / "shared.sqlite3"
    for name in ("first", "second"):  # each its own folder, one SQLite file
        (tmp_path / f"{name}.toml").write_text(
            f'[reef]\nstate-dir = "{tmp_path / name}"\n[store]\nurl = "sqlite:{database}"\n'
            f'[inference]\nupstream-url = "{upstream}"\n'
        )
    first = DaemonProcess(tmp_path / "first.toml", tmp_path / "first.log")
    async with aiohttp.ClientSession() as session:
        await first.ready(session)
        second = DaemonProcess(tmp_path / "second.toml", tmp_path / "second.log")
        code = await asyncio.to_thread(second.process.wait, 60)
        said = second.output()
        assert code != 0, said
        assert f"pid {first.process.pid} at {first.url}" in said and str(database) in said, said
        assert "Traceback" not in said
        async with session.post(first.url + "/v1/chat/completions", json=CHAT, headers={"x-reef-scenario": "a"}) as r:
            assert r.status == 200  # the first daemon still writes
    assert first.stop() == 0
    assert second.stop() != 0
