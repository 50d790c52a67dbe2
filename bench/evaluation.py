"""Benchmark of reefine's evaluation gate: wall time and model calls per candidate against the number of protected
tasks, on the scripted model (the text proposer's calls scripted, the real pi answered by the fake upstream).

    PYTHONPATH=$PWD .venv/bin/python bench/evaluation.py [--tasks 1 3 6] [--repeat 2] [--frame-delay-ms MS]
                                                         [--parallel N]

Each candidate runs the behaviour check and every protected task on the served version and on the candidate (two
pi runs a task, side by side, in the jail; `harness.eval-parallel` tasks at once, or `--parallel`); the tasks carry
a regex, so the judge is not asked. `--frame-delay-ms` paces the fake model's streamed frames (about ten an answer),
for a model that takes time to answer rather than one that answers at once. Needs pi
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

from bench.harness_daemon import SCENARIO, fake_models, installed_pi, reefine_daemon, settle
from tests.support.fake_proposer_model import answer, skill


async def candidate(session: aiohttp.ClientSession, base: str, number: int) -> dict[str, Any]:
    """File one request and wait until it settles; the gate's figures from its evidence."""
    started = time.monotonic()
    progress = await settle(session, base, f"be brief ({number})")
    evidence = progress.get("evidence") or {}
    return {
        "result": progress.get("result"),
        "settled_s": round(time.monotonic() - started, 2),
        "gate_s": evidence.get("seconds"),
        "gate_model_calls": evidence.get("model_calls"),
        "rows": len(evidence.get("rows") or []),
    }


async def run(pi: Path, tasks: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """A fresh daemon with `tasks` protected tasks; `args.repeat` candidates through its gate."""
    state = Path(tempfile.mkdtemp(prefix="reef-bench-evaluation-"))
    rows = []
    async with fake_models() as (models, upstream):
        models.agents.delay_ms = args.frame_delay_ms
        overrides = {**upstream, "harness.trial": str(pi), "harness.proposer-agent": "off"}
        if args.parallel is not None:
            overrides["harness.eval-parallel"] = str(args.parallel)
        async with reefine_daemon(state, overrides) as (session, base):
            for number in range(tasks):
                task = {"prompt": f"What is the capital of France? ({number})", "regex": "Paris", "protected": True}
                async with session.post(f"{base}/reef/scenarios/{SCENARIO}/tasks", json=task) as added:
                    assert added.status < 300, await added.text()
            for number in range(args.repeat):
                models.proposer.script("answer", answer("Brief.\n\nHow to use: ask.", skill(f"brief-{number}")))
                row = {"tasks": tasks, **await candidate(session, base, number)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


async def main(args: argparse.Namespace) -> int:
    pi = installed_pi()
    if pi is None:
        return 2
    summaries = []
    for tasks in args.tasks:
        rows = await run(pi, tasks, args)
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
    parser.add_argument("--frame-delay-ms", type=float, default=0.0)
    parser.add_argument("--parallel", type=int, default=None, help="harness.eval-parallel (default: the setting's)")
    sys.exit(asyncio.run(main(parser.parse_args())))
