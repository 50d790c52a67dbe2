"""Benchmark of reefine's evaluation gate: wall time and model calls per candidate against the number of protected
tasks, on the scripted model (the text proposer's calls scripted, the real pi answered by the fake upstream).

    PYTHONPATH=$PWD .venv/bin/python bench/evaluation.py [--tasks 1 3 6] [--repeat 2]

Each candidate runs the behaviour check and every protected task on the served version and on the candidate (two
pi runs a task, side by side, in the jail); the tasks carry a regex, so the judge is not asked. Needs pi
(scripts/setup installs it under .tools) and bubblewrap. Prints one JSON line per candidate and a summary per
number of tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from reef_daemon.app import create_app
from reef_daemon.context import DAEMON
from reef_daemon.settings import load_settings
from tests.support.adapters_testing import agent_binary
from tests.support.agent_upstream import AgentUpstream
from tests.support.fake_proposer_model import answer, skill

SCENARIO = "bench"
HEADERS = {"x-reef-scenario": SCENARIO}


async def candidate(session: aiohttp.ClientSession, base: str, number: int) -> dict[str, Any]:
    """File one request and wait until it settles; the gate's figures from its evidence."""
    started = time.monotonic()
    async with session.post(f"{base}/reef/train", json={"text": f"be brief ({number})"}, headers=HEADERS) as filed:
        request_id = (await filed.json())["agent_record_id"]
    while True:
        async with session.get(f"{base}/reef/requests/{request_id}", headers=HEADERS) as answered:
            progress = await answered.json()
        if progress["state"] == "settled":
            break
        await asyncio.sleep(0.5)
    evidence = progress.get("evidence") or {}
    return {
        "result": progress.get("result"),
        "settled_s": round(time.monotonic() - started, 2),
        "gate_s": evidence.get("seconds"),
        "gate_model_calls": evidence.get("model_calls"),
        "rows": len(evidence.get("rows") or []),
    }


async def run(pi: Path, tasks: int, repeat: int) -> list[dict[str, Any]]:
    """A fresh daemon with `tasks` protected tasks; `repeat` candidates through its gate."""
    state = Path(tempfile.mkdtemp(prefix="reef-bench-evaluation-"))
    models = AgentUpstream()
    upstream = TestServer(models.app(), host="127.0.0.1")
    await upstream.start_server()
    overrides = {
        "recipe": "reefine",
        "reef.state-dir": str(state),
        "inference.upstream-url": str(upstream.make_url("")).rstrip("/"),
        "inference.upstream-model": "fake-proposer",
        "harness.trial": str(pi),
        "harness.proposer-agent": "off",
    }
    server = TestServer(create_app(load_settings(overrides=overrides, environ={})), host="127.0.0.1")
    await server.start_server()
    assert server.port is not None
    server.app[DAEMON].listening(server.port)
    base = str(server.make_url("")).rstrip("/")
    rows = []
    try:
        async with aiohttp.ClientSession() as session:
            await session.post(f"{base}/reef/scenarios", json={"name": SCENARIO})
            for number in range(tasks):
                task = {"prompt": f"What is the capital of France? ({number})", "regex": "Paris", "protected": True}
                async with session.post(f"{base}/reef/scenarios/{SCENARIO}/tasks", json=task) as added:
                    assert added.status < 300, await added.text()
            for number in range(repeat):
                models.proposer.script("answer", answer("Brief.\n\nHow to use: ask.", skill(f"brief-{number}")))
                row = {"tasks": tasks, **await candidate(session, base, number)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        await server.close()
        await upstream.close()
        models.close()
    return rows


async def main(args: argparse.Namespace) -> int:
    pi = agent_binary("pi")
    if pi is None:
        print("pi is not installed; scripts/setup installs it", file=sys.stderr)
        return 2
    summaries = []
    for tasks in args.tasks:
        rows = await run(pi, tasks, args.repeat)
        summaries.append(
            {
                "tasks": tasks,
                "candidates": len(rows),
                "gate_s_median": round(statistics.median(float(row["gate_s"] or 0) for row in rows), 2),
                "settled_s_median": statistics.median(row["settled_s"] for row in rows),
                "gate_model_calls_median": statistics.median(int(row["gate_model_calls"] or 0) for row in rows),
                "results": sorted({str(row["result"]) for row in rows}),
            }
        )
    for summary in summaries:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--repeat", type=int, default=2)
    sys.exit(asyncio.run(main(parser.parse_args())))
