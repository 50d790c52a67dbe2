"""Scores that need no person: what the signals cost per 100 conversations (the rules on the user's words, a
retry, a failed tool call, a test run: reports, model calls, wall time until every turn is scored) and what the
next-turn judge costs (judge calls, tokens, wall time until every turn is judged), and the proxy's latency with
every signal off, with the rules (the default) and with the rules and the judge (both run off the request path, so
the three should match).

Everything runs in this process on loopback ports: reef (the `record` recipe), the fake upstream model and the
scripted judge of the tests (`tests/support`). Each conversation is a scripted user with a hidden preference
(answers must cite a file path) through reef with the session tag: three turns, so two answers are scored by the
user's next message. The judge's runs use next messages the words rules cannot label, so it reads every one.

    .venv/bin/python bench/implicit_rewards.py --conversations 100 --rounds 5
    .venv/bin/python bench/implicit_rewards.py --embedded --conversations 20   # the embedded model answers and judges

With `--embedded` the daemon serves the embedded model (no upstream) and the same model judges (no judge endpoint):
the user's replies follow the preference on what the model said, and only the judge's cost is measured (`--models`
links a converted model cache, such as `~/.reef/models`, instead of converting the GGUF into a temporary folder).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reef_contract import JUDGE_SCENARIO
from reef_daemon.settings import load_settings
from tests.support.app_servers import AppServers, url_of
from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import Reef
from tests.support.simulated_user import SimulatedUser, reply_to

ANSWERS = ["The login is in src/auth/login.py.", "It is in the auth module.", "See src/auth/session.py."]
EMBEDDED_JUDGE_TOKENS = 48  # the judge's verdict is a short JSON object; the tiny model rambles past it otherwise


RULES = ("words", "retry", "interruption", "tool-error", "tests")
Signals = Literal["off", "rules", "judge"]


async def reef_with(
    servers: AppServers, state: Path, signals: Signals, judge_url: str | None, models: Path | None = None
) -> Reef:
    """A daemon in front of the fake upstream, or (`models`: a converted model cache) serving the embedded model,
    with every signal off, the rules only (the default), or the rules and the next-turn judge."""
    upstream = FakeUpstream()
    overrides: dict[str, Any] = {"reef.state-dir": str(state)}
    if signals == "off":
        overrides |= {f"reports.{rule}": "off" for rule in RULES}
    if models is None:
        overrides["inference.upstream-url"] = url_of(await servers.serve(upstream.app()))
    else:
        state.mkdir(parents=True)
        (state / "models").symlink_to(models, target_is_directory=True)
        overrides |= {"reports.judge-max-tokens": str(EMBEDDED_JUDGE_TOKENS), "inference.max-tokens": "24"}
    if signals == "judge":
        overrides |= {"reports.next-turn": "on", "reports.judge-calls-per-minute": "100000"}
        if judge_url:
            overrides["reports.judge-url"] = judge_url
    server = await servers.reef(load_settings(overrides=overrides, environ={}))
    session = aiohttp.ClientSession()
    servers.close_later(session.close)
    return Reef(url_of(server), server, upstream, session)


async def timed_conversation(reef: Reef, name: str, labelled: bool = True) -> list[float]:
    """One conversation; the milliseconds each of its requests took, as the client saw them. `labelled`: the next
    messages are plain words the rules label ("Thanks", "No"); otherwise words only a judge can read."""
    user = SimulatedUser(reef, name)
    took = []
    text = "Where is the login handled?"
    for number, answer in enumerate([*ANSWERS[:2], "Done."]):
        started = time.perf_counter()
        await user.turn(text, answer)
        took.append((time.perf_counter() - started) * 1000)
        if labelled:
            said = "Thanks, next: " if "/" in answer else "No, that is wrong. Which file? Then: "
        else:
            said = "Next: " if "/" in answer else "Nope, which file? Then: "
        text = f"{said}task {number + 2}"
    return took


async def embedded_conversation(reef: Reef, name: str) -> None:
    """Three turns with the embedded model; each reply follows the preference on what the model said."""
    messages: list[dict[str, Any]] = []
    text = "Where is the login handled?"
    for number in range(3):
        messages.append({"role": "user", "content": text})
        response = await reef.post("/v1/chat/completions", {"model": "smollm2", "messages": messages},
                                   headers={"x-reef-tag-session": name})  # fmt: skip
        assert response.status == 200, await response.text()
        said = (await response.json())["choices"][0]["message"]["content"]
        messages.append({"role": "assistant", "content": said})
        text = reply_to(said, f"task {number + 2}")


async def rules_cost(servers: AppServers, root: Path, conversations: int) -> dict[str, Any]:
    """The default daemon (the rules, no judge): reports by source, model calls besides the users' own, and the
    time until every answer a next message follows is scored."""
    reef = await reef_with(servers, root / "rules", "rules", None)
    signals = reef.daemon.next_turn
    assert signals is not None
    started = time.perf_counter()
    for n in range(conversations):
        await timed_conversation(reef, f"rules-{n}")
    traffic_s = time.perf_counter() - started
    while sum(signals.counts.reports.values()) < 2 * conversations:
        await asyncio.sleep(0.01)
    return {
        "conversations": conversations,
        "reports": dict(signals.counts.reports),
        "model calls besides the users'": len(reef.upstream.received) - 3 * conversations,
        "traffic s": round(traffic_s, 2),
        "scored by s": round(time.perf_counter() - started, 2),
        "memory kept, bytes": signals.counts.kept_bytes,
    }


async def cost(
    servers: AppServers, root: Path, conversations: int, judge_url: str | None, models: Path | None
) -> dict[str, Any]:
    reef = await reef_with(servers, root / "cost", "judge", judge_url, models)
    judge = reef.daemon.next_turn
    assert judge is not None
    started = time.perf_counter()
    for n in range(conversations):
        if models is None:
            await timed_conversation(reef, f"cost-{n}", labelled=False)
        else:
            await embedded_conversation(reef, f"cost-{n}")
    traffic_s = time.perf_counter() - started
    expected = 2 * conversations
    while judge.counts.judged + judge.counts.neutral + judge.counts.no_judgment + judge.counts.over_bounds < expected:
        await asyncio.sleep(0.05)
    wall_s = time.perf_counter() - started
    calls = await _all_records(reef, JUDGE_SCENARIO)
    return {
        "conversations": conversations,
        "judged turns": judge.counts.judged,
        "no verdict": judge.counts.no_judgment,
        "passed over (bounds)": judge.counts.over_bounds,
        "judge calls": len(calls),
        "input tokens": sum(c["usage"]["input_tokens"] or 0 for c in calls),
        "output tokens": sum(c["usage"]["output_tokens"] or 0 for c in calls),
        "traffic s": round(traffic_s, 2),
        "judged by s": round(wall_s, 2),
        "judge ms (median)": round(statistics.median(c["duration_ms"] for c in calls), 1) if calls else None,
    }


async def latency(
    servers: AppServers, root: Path, rounds: int, per_round: int, judge_url: str | None
) -> dict[str, Any]:
    arms: list[tuple[Signals, Reef]] = [
        (signals, await reef_with(servers, root / signals, signals, judge_url)) for signals in ("off", "rules", "judge")
    ]
    took: dict[str, list[float]] = {signals: [] for signals, _ in arms}
    for number in range(rounds * per_round):  # conversation by conversation, rotating which goes first
        shift = number % len(arms)
        for arm, reef in arms[shift:] + arms[:shift]:
            took[arm] += await timed_conversation(reef, f"lat-{number}", labelled=arm != "judge")
    figures: dict[str, Any] = {}
    for name, values in took.items():
        values.sort()
        figures[name] = {
            "requests": len(values),
            "median ms": round(statistics.median(values), 2),
            "p90 ms": round(values[int(0.9 * (len(values) - 1))], 2),
        }
    return figures


async def _all_records(reef: Reef, scenario: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    after = 0
    while True:
        page = await (await reef.get("/reef/records", params={"scenario": scenario, "after": str(after),
                                                               "limit": "500"})).json()  # fmt: skip
        rows += page["records"]
        if len(page["records"]) < 500:
            return rows
        after = page["next_after"]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the latency comparison")
    parser.add_argument("--per-round", type=int, default=10, help="conversations per daemon per round")
    parser.add_argument("--served", action="store_true", help="the served model judges (no judge endpoint)")
    parser.add_argument("--embedded", action="store_true", help="the embedded model answers and judges")
    parser.add_argument("--models", type=Path, help="with --embedded: a converted model cache to link")
    options = parser.parse_args()
    servers = AppServers()
    judge_process = None
    try:
        judge_url = None
        if not (options.served or options.embedded):  # the judge in a process of its own, as a judge endpoint is
            judge_process, judge_url = await _judge_process()
        with tempfile.TemporaryDirectory() as folder:
            models = _models(options.models, Path(folder)) if options.embedded else None
            if models is None:
                print("rules cost:", await rules_cost(servers, Path(folder), options.conversations))
            print("judge cost:", await cost(servers, Path(folder), options.conversations, judge_url, models))
            if models is None:
                print("proxy latency:", await latency(servers, Path(folder), options.rounds, options.per_round,
                                                      judge_url))  # fmt: skip
    finally:
        await servers.close()
        if judge_process is not None:
            judge_process.terminate()
            await judge_process.wait()


def _models(given: Path | None, folder: Path) -> Path:
    """A converted model cache: the one given, or the GGUF converted into `folder` (a cold load, not timed)."""
    if given is not None:
        return given.expanduser().resolve()
    from reef_daemon.runtimes.embedded.loading import load_model, resolve_source

    state = folder / "converted"
    (state / "models").mkdir(parents=True)
    load_model(resolve_source(None), state)
    return state / "models"


async def _judge_process() -> tuple[asyncio.subprocess.Process, str]:
    port = _free_port()
    code = (
        "from aiohttp import web; from tests.support.fake_judge import FakeJudge; "
        f"web.run_app(FakeJudge().app(), host='127.0.0.1', port={port}, print=None)"
    )
    root = str(Path(__file__).resolve().parents[1])
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=root)
    url = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        for _ in range(200):
            try:
                async with session.get(url + "/v1/chat/completions"):  # 405: it is up
                    return process, url
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
    raise RuntimeError("the judge process did not start")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


if __name__ == "__main__":
    asyncio.run(main())
