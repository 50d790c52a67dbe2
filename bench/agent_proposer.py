"""Benchmark of reefine's agent proposer: wall time, model calls and trials per change request, and the share of the
wall time spent in trials; on the scripted model (pi driven through a fixed session) or on the embedded model.

    PYTHONPATH=$PWD .venv/bin/python bench/agent_proposer.py [--requests 3]
    PYTHONPATH=$PWD .venv/bin/python bench/agent_proposer.py --embedded [MODELS] --requests 1 --wall-s 120

Needs pi (scripts/setup installs it under .tools) and bubblewrap. Prints one JSON line per request and a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness_daemon import HEADERS, SCENARIO, fake_models, installed_pi, reefine_daemon, settle

SESSION = [
    "cat context/request.md",
    "printf '# Be brief (%s)\\nAnswer in one sentence.\\n' \"$(date +%N)\" > skills/brief.md",
    "printf 'A brief skill.\\n\\nHow to use: just ask.' > design.md && harness-check",
    "harness-trial 'What is the capital of France?' --expect Paris",
    """printf '{"prompt": "What is the capital of France?", "regex": "Paris"}' > check.json""",
]


async def one(session: aiohttp.ClientSession, base: str, text: str, limit_s: float) -> dict[str, Any]:
    started = time.monotonic()
    progress = await settle(session, base, text, limit_s)
    async with session.get(f"{base}/reef/scenarios/{SCENARIO}/releases", headers=HEADERS) as listed:
        rows = (await listed.json())["releases"]
    agent = next((row["metrics"].get("agent") for row in rows if row["metrics"].get("agent")), None) or {}
    trials = sum(float(trial.get("seconds") or 0) for trial in agent.get("trials", []))
    wall = float(agent.get("seconds") or 0)
    return {
        "result": progress.get("result"),
        "settled_s": round(time.monotonic() - started, 2),
        "agent_s": wall,
        "model_calls": agent.get("model_calls"),
        "trials": len(agent.get("trials", [])),
        "trial_share": round(trials / wall, 3) if wall else None,
    }


async def main(args: argparse.Namespace) -> int:
    pi = installed_pi()
    if pi is None:
        return 2
    os.environ["PATH"] = os.pathsep.join([str(pi.parent), os.environ["PATH"]])
    state = Path(tempfile.mkdtemp(prefix="reef-bench-proposer-"))
    overrides = {"harness.proposer-wall-s": str(args.wall_s)}
    rows = []
    async with AsyncExitStack() as stack:
        if args.embedded is not None:
            if args.embedded:
                (state / "models").symlink_to(Path(args.embedded).expanduser(), target_is_directory=True)
            overrides["harness.max-tokens"] = "48"
        else:
            models, upstream = await stack.enter_async_context(fake_models())
            models.session.commands = SESSION
            overrides.update(upstream)
        session, base = await stack.enter_async_context(reefine_daemon(state, overrides))
        for number in range(args.requests):
            row = await one(session, base, f"make answers brief ({number})", args.wall_s + 300)
            print(json.dumps(row))
            rows.append(row)
    shares = [row["trial_share"] for row in rows if row["trial_share"] is not None]
    summary = {
        "model": "scripted" if args.embedded is None else "embedded",
        "requests": len(rows),
        "agent_s_median": statistics.median(row["agent_s"] for row in rows),
        "model_calls_median": statistics.median(row["model_calls"] or 0 for row in rows),
        "trials_median": statistics.median(row["trials"] for row in rows),
        "trial_share_median": statistics.median(shares) if shares else None,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--wall-s", type=float, default=300)
    parser.add_argument(
        "--embedded",
        nargs="?",
        const="",
        help="serve the embedded model instead of the script (optionally: a models cache)",
    )
    sys.exit(asyncio.run(main(parser.parse_args())))
