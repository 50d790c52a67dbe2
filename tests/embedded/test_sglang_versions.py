"""The sglang engine's weight versions follow the checkpoint the SGLang server holds (a fake server here): the same
checkpoint gives the same version across restarts, another checkpoint another incarnation; a swap takes the next
number of the machine's ledger, never one an earlier run used; attached to a server that loaded other weights, the
version is theirs; where the server's files cannot be read, a random incarnation is used and the log says why once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from safetensors.torch import load_file

from reef_daemon.runtimes.embedded.job import Finished, Job
from reef_daemon.runtimes.embedded.sampling import SamplingParams
from reef_daemon.runtimes.embedded.sglang import launch
from reef_daemon.runtimes.embedded.sglang.engine import SglangEngine
from reef_daemon.runtimes.embedded.sglang.weights import write_updated
from reef_daemon.runtimes.embedded.text import TextAssembler
from reef_daemon.runtimes.embedded.versions import fingerprint_files
from reef_daemon.settings import load_settings
from tests.support.fake_sglang import FakeSglang, model_folder

ServeFake = Callable[[Path], Awaitable[tuple[FakeSglang, str]]]
StartEngine = Callable[..., Awaitable[SglangEngine]]


@pytest.fixture(autouse=True)
def own_ledger(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This test's own user cache, where the ledger of version numbers is kept."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "reef" / "weight-versions"


@pytest.fixture
def folder(embedded_models: Path) -> Path:
    return model_folder(embedded_models)


@pytest.fixture
async def serve() -> AsyncIterator[ServeFake]:
    """Start fake SGLang servers on checkpoint folders; (server, url)."""
    servers: list[TestServer] = []

    async def start(checkpoint: Path) -> tuple[FakeSglang, str]:
        fake = FakeSglang(checkpoint)
        server = TestServer(fake.app(), host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return fake, str(server.make_url("")).rstrip("/")

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def start_engine(tmp_path: Path, folder: Path) -> AsyncIterator[StartEngine]:
    """Start sglang engines on one state directory, with the embedded model as `inference.model-path`."""
    engines: list[SglangEngine] = []

    async def start(**overrides: str) -> SglangEngine:
        settings = load_settings(
            overrides={
                "reef.state-dir": str(tmp_path / "state"),
                "embedded.engine": "sglang",
                "inference.model-path": str(folder),
                **overrides,
            },
            environ={},
        )
        engine = SglangEngine(settings)
        await engine.start()
        engines.append(engine)
        return engine

    yield start
    for engine in engines:
        await engine.close()


async def generated_versions(engine: SglangEngine) -> list[str]:
    """The versions the engine stamps on the tokens of a short greedy answer."""
    prompt = engine.tokenizer.encode("The sea is")
    params = SamplingParams(max_tokens=3, temperature=0.0)
    job = Job(list(prompt), params, TextAssembler(engine.tokenizer, ()), asyncio.get_running_loop(), engine.version)
    engine.submit(job)
    while not isinstance(event := await asyncio.wait_for(job.events.get(), 120), Finished):
        pass
    assert event.reason in ("stop", "length"), event
    return job.versions


def scaled_norm(checkpoint: Path) -> dict[str, object]:
    """A trained-looking change of one tensor."""
    return {"model.norm.weight": load_file(str(checkpoint / "model.safetensors"))["model.norm.weight"] * 1.5}


async def test_the_same_checkpoint_keeps_its_version_across_restarts(
    serve: ServeFake, start_engine: StartEngine, folder: Path, tmp_path: Path
) -> None:
    _, url = await serve(folder)
    first = await start_engine(**{"embedded.sglang-url": url})
    _, other_url = await serve(folder)
    again = await start_engine(**{"embedded.sglang-url": other_url})
    assert first.version == again.version == f"{fingerprint_files(folder)}:0"
    assert set(await generated_versions(again)) == {again.version}
    copy = tmp_path / "copy"
    copy.mkdir()
    for file in folder.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    _, copy_url = await serve(copy)
    assert (await start_engine(**{"embedded.sglang-url": copy_url})).version == first.version  # content, not path


async def test_a_changed_checkpoint_is_another_incarnation(
    serve: ServeFake, start_engine: StartEngine, folder: Path, tmp_path: Path
) -> None:
    changed = write_updated(folder, scaled_norm(folder), tmp_path / "changed")
    _, url = await serve(folder)
    _, changed_url = await serve(changed)
    loaded = await start_engine(**{"embedded.sglang-url": url})
    other = await start_engine(**{"embedded.sglang-url": changed_url})
    assert other.version.endswith(":0") and other.version.split(":")[0] != loaded.version.split(":")[0]


async def test_a_swap_takes_the_ledgers_next_number_and_a_restart_never_reuses_it(
    serve: ServeFake, start_engine: StartEngine, folder: Path, own_ledger: Path
) -> None:
    incarnation = fingerprint_files(folder)
    _, url = await serve(folder)
    first = await start_engine(**{"embedded.sglang-url": url})
    assert await first.swap_weights(scaled_norm(folder)) == f"{incarnation}:1"
    assert set(await generated_versions(first)) == {f"{incarnation}:1"}
    await first.close()
    _, fresh_url = await serve(folder)  # the same checkpoint served again: the version it had
    restarted = await start_engine(**{"embedded.sglang-url": fresh_url})
    assert restarted.version == f"{incarnation}:0"
    assert await restarted.swap_weights(scaled_norm(folder)) == f"{incarnation}:2"  # 1 named the earlier run's
    assert (own_ledger / incarnation).read_text().strip() == "2"


async def test_attached_to_a_server_that_loaded_new_weights_the_version_follows_them(
    serve: ServeFake, start_engine: StartEngine, folder: Path
) -> None:
    fake, url = await serve(folder)
    first = await start_engine(**{"embedded.sglang-url": url})
    swapped = await first.swap_weights(scaled_norm(folder))
    loaded = first.weights_dir
    await first.close()
    assert fake.version == swapped and fake.model_path == loaded
    attached = await start_engine(**{"embedded.sglang-url": url})  # the server still labels its weights `swapped`
    trained = fingerprint_files(loaded)
    assert attached.version == f"{trained}:0" and attached.weights_dir == loaded
    assert set(await generated_versions(attached)) == {f"{trained}:0"}
    assert await attached.swap_weights(scaled_norm(loaded)) == f"{trained}:1"


async def test_a_launched_server_starts_under_the_checkpoints_version(
    serve: ServeFake, start_engine: StartEngine, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reef launches SGLang with `--weight-version <fingerprint>:0` (a fake stands in for the server here)."""
    fake, url = await serve(folder)
    launched: list[tuple[str, ...]] = []

    def start_server(plan: launch.LaunchPlan) -> subprocess.Popen[bytes]:
        launched.append(plan.argv)
        fake.version = dict(itertools.pairwise(plan.argv))["--weight-version"]
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])

    monkeypatch.setattr(launch, "check_launchable", lambda path: path)
    monkeypatch.setattr(launch, "start_server", start_server)
    engine = await start_engine(**{"embedded.sglang-port": url.rsplit(":", 1)[1]})
    version = f"{fingerprint_files(folder)}:0"
    assert [dict(itertools.pairwise(argv))["--weight-version"] for argv in launched] == [version]
    assert engine.version == version and set(await generated_versions(engine)) == {version}


async def test_an_unreadable_checkpoint_gets_a_random_incarnation_and_the_log_says_why_once(
    serve: ServeFake, start_engine: StartEngine, folder: Path, own_ledger: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server on another host reports a model path reef cannot read: the versions of this run are its own."""
    fake, url = await serve(folder)
    fake.model_path = Path("/models/on/another/host")
    with caplog.at_level(logging.WARNING, logger="reef.embedded"):
        engine = await start_engine(**{"embedded.sglang-url": url})
        versions = await generated_versions(engine) + await generated_versions(engine)
    incarnation, _, sequence = engine.version.rpartition(":")
    assert incarnation.startswith("random-") and sequence == "0" and set(versions) == {engine.version}
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert incarnation in warnings[0] and f"/models/on/another/host that the SGLang server at {url}" in warnings[0]
    assert "cannot be read here (no such folder)" in warnings[0]
    assert await engine.swap_weights(scaled_norm(folder)) == f"{incarnation}:1"  # from inference.model-path
    assert not own_ledger.exists()  # a random incarnation never comes back: no number is kept for it
    fake.model_path = Path("/models/on/another/host")
    again = await start_engine(**{"embedded.sglang-url": url})
    assert again.version.startswith("random-") and again.version.split(":")[0] != incarnation


async def test_under_slime_the_versions_are_the_runs_own(
    serve: ServeFake, start_engine: StartEngine, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Slime loads the served weights from its own checkpoints and counts its pushes from 1 at each launch."""
    _, url = await serve(folder)
    with caplog.at_level(logging.WARNING, logger="reef.embedded"):
        first = await start_engine(**{"recipe": "sao", "training.trainer": "slime", "embedded.sglang-url": url})
        again = await start_engine(**{"recipe": "sao", "training.trainer": "slime", "embedded.sglang-url": url})
    assert first.version.startswith("random-") and again.version.startswith("random-")
    assert first.version != again.version
    assert [record.getMessage().endswith("Slime loads the weights SGLang serves from its own checkpoints")
            for record in caplog.records if record.levelno == logging.WARNING] == [True, True]  # fmt: skip
