"""The step tools the daemon serves to one proposer run: only with the run's token; trials counted and bounded by
the daemon however they are asked for (at once, or past the time the run has left); a trial's project is read from
the workspace without leaving it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from adapters import get_adapter
from recipes.reefine.agent_trial import TrialRun
from recipes.reefine.step_tools import FINISH_RESERVE_S, StepTools
from recipes.reefine.workspace import lay_out, make_writable
from reef_harness import Entry
from tests.support.waiting import eventually

PI = get_adapter("pi")
TOKEN = "step-token"
Ask = Callable[..., Awaitable[tuple[int, dict[str, Any]]]]


class Trials:
    """A stand-in for the trial agent: records what each trial was given; a trial lasts until `release` is set."""

    def __init__(self, answer: str = "Paris.") -> None:
        self.answer = answer
        self.started: list[tuple[str, dict[str, str], float]] = []
        self.release = asyncio.Event()
        self.release.set()

    async def start(self, entries: list[Entry], prompt: str, project: Mapping[str, str], limit: float) -> TrialRun:
        self.started.append((prompt, dict(project), limit))
        await self.release.wait()
        return TrialRun(self.answer, 0, 0.1, False, [])


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "workspace"
    lay_out(folder, [], PI, "make answers brief", [], "# Your job\n")
    (folder / "skills" / "brief.md").write_text("# Be brief\nAnswer in one sentence.")
    yield folder
    make_writable(folder)


async def serve(tools: StepTools) -> tuple[TestServer, Ask]:
    app = web.Application()
    app.router.add_routes(tools.routes())
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()

    async def ask(tool: str, body: Any, token: str = TOKEN) -> tuple[int, dict[str, Any]]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                str(server.make_url(f"/reef-step/{tool}")), json=body, headers={"Authorization": f"Bearer {token}"}
            ) as answer,
        ):
            return answer.status, await answer.json()

    return server, ask


def step_tools(workspace: Path, trials: Trials, trials_max: int = 1, left_s: float = 600) -> StepTools:
    limits = (trials_max, 30.0, time.time() + left_s)
    return StepTools(PI, [], workspace, limits, trials.start, "", TOKEN)


async def test_only_the_runs_token_is_served(workspace: Path) -> None:
    trials = Trials()
    server, ask = await serve(step_tools(workspace, trials))
    try:
        status, answer = await ask("trial", {"prompt": "hello"}, token="forged")
        assert (status, answer["code"]) == (401, 1) and trials.started == []
        status, answer = await ask("check", {})
        assert status == 200 and answer["output"].startswith("admitted: the candidate has 1 entries")
    finally:
        await server.close()


async def test_trials_asked_for_at_once_are_counted_one_by_one(workspace: Path) -> None:
    trials = Trials()
    trials.release.clear()
    tools = step_tools(workspace, trials, trials_max=2)
    server, ask = await serve(tools)
    try:
        asked = [asyncio.ensure_future(ask("trial", {"prompt": f"p{n}"})) for n in range(4)]
        await eventually(lambda: trials.started, 10, "the first trial to start")  # the others wait their turn
        trials.release.set()
        answers = [answer for _status, answer in await asyncio.gather(*asked)]
    finally:
        await server.close()
    assert sorted(answer["code"] for answer in answers) == [0, 0, 1, 1]
    assert len(trials.started) == 2 and len(tools.trials) == 2
    spent = [answer["output"] for answer in answers if answer["code"] == 1]
    assert all(line.startswith("refused: this run may make 2 trials; all are spent.") for line in spent)


async def test_a_trial_gets_the_time_the_run_has_left_and_none_at_its_end(workspace: Path) -> None:
    trials = Trials()
    server, ask = await serve(step_tools(workspace, trials, trials_max=5, left_s=FINISH_RESERVE_S + 10))
    try:
        _status, answer = await ask("trial", {"prompt": "hello", "expect": "Par"})
        assert answer["code"] == 0 and "expect /Par/: matched" in answer["output"]
        assert 5 < trials.started[0][2] <= 10  # not the 30 s a trial may take: the run ends sooner
    finally:
        await server.close()
    server, ask = await serve(step_tools(workspace, trials, trials_max=5, left_s=FINISH_RESERVE_S))
    try:
        _status, answer = await ask("trial", {"prompt": "hello"})
        assert answer["output"].startswith("refused: no time is left for a trial.")
        assert len(trials.started) == 1
    finally:
        await server.close()


async def test_a_trials_project_is_read_inside_the_workspace_only(workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("daemon state")
    (workspace / "fixture").mkdir()
    (workspace / "fixture" / "app.py").write_text("print('hi')\n")
    (workspace / "fixture" / "leak").symlink_to(tmp_path / "secret")
    (workspace / "linked").symlink_to(tmp_path, target_is_directory=True)
    trials = Trials()
    server, ask = await serve(step_tools(workspace, trials, trials_max=5))
    try:
        _status, answer = await ask("trial", {"prompt": "run it", "workspace": "fixture"})
        assert answer["code"] == 0
        for outside in ("..", "linked", "/etc", "fixture/../.."):
            _status, answer = await ask("trial", {"prompt": "run it", "workspace": outside})
            assert answer["output"].startswith(f"refused: --workspace '{outside}' is not a folder"), outside
    finally:
        await server.close()
    assert [project for _prompt, project, _limit in trials.started] == [{"app.py": "print('hi')\n"}]


async def test_an_expect_that_runs_too_long_does_not_match_and_says_so(workspace: Path) -> None:
    trials = Trials(answer="a" * 40 + "b")
    server, ask = await serve(step_tools(workspace, trials, trials_max=5))
    try:
        _status, answer = await ask("trial", {"prompt": "hello", "expect": "(a|a)+$"})
        assert answer["code"] == 1
        too_long = "expect /(a|a)+$/: did NOT match: the pattern took too long (regex timed out after 1 s)"
        assert too_long in answer["output"]
        for expect, why in (("(unclosed", "does not compile"), ("((a{99}){99}){99}", "repeats too much")):
            _status, answer = await ask("trial", {"prompt": "hello", "expect": expect})
            assert answer["output"].startswith(f"refused: --expect {why}"), answer["output"]
    finally:
        await server.close()
    assert len(trials.started) == 1  # a refused pattern starts no trial


async def test_an_expect_whose_flags_hide_its_size_is_refused_and_no_trial_runs(workspace: Path) -> None:
    trials = Trials()
    server, ask = await serve(step_tools(workspace, trials))
    try:
        _status, answer = await ask("trial", {"prompt": "hello", "expect": "(?x)(a {3000}) {1000}"})
        assert answer["code"] == 1 and trials.started == []
        assert answer["output"].startswith("refused: --expect needs more than 128 MiB to compile")
    finally:
        await server.close()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "refused: the request body is nested too deeply"),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "refused: the request body is nested too deeply"),
        (b"[1]", "refused: the request body must be a JSON object, not list"),
        (b"{not json", "refused: the request body is not valid JSON"),
        (b'{"prompt": 1e400}', "refused: the request body is not valid JSON: the number 1e400 is out of range"),
    ],
    ids=["deep-list", "deep-object", "list", "not-json", "out-of-range"],
)
async def test_a_body_that_is_not_a_usable_json_object_is_a_400_that_says_why(
    workspace: Path, body: bytes, why: str
) -> None:
    trials = Trials()
    server, _ask = await serve(step_tools(workspace, trials))
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                str(server.make_url("/reef-step/trial")), data=body, headers={"Authorization": f"Bearer {TOKEN}"}
            ) as answer,
        ):
            assert answer.status == 400
            assert (await answer.json())["output"].startswith(why)
        assert trials.started == []
    finally:
        await server.close()
