"""`reef demo sao --compare --seeds N`, one seed per process, so that a run stopped early keeps every seed it finished.

Each seed's `--json` result is written to `OUT/seed-<n>.json` as it ends; `--combine` reads the ones there and
prints the demo's own result over them (per arm: held-out before/after, the change with its 95 % interval over
seeds x questions, each seed's change; the differences between arms), as `reef demo sao --compare --seeds N --json`
would have. A benchmark, not a test: it asserts nothing.

    nice -n 10 .venv/bin/python bench/sao_demo_seeds.py --seeds 8 --out /tmp/sao-seeds
    .venv/bin/python bench/sao_demo_seeds.py --combine --out /tmp/sao-seeds > /tmp/sao-demo.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from reef_cli.demo_run import Arm, ArmRun, StepRow
from reef_cli.render.demo import result_json


def run_seeds(first: int, count: int, out: Path, extra: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for seed in range(first, first + count):
        began = time.perf_counter()
        command = [sys.executable, "-m", "reef_cli", "demo", "sao", "--compare", "--seed", str(seed), "--json"]
        result = subprocess.run(command + extra, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            sys.exit(f"seed {seed} failed ({result.returncode}): {result.stderr[-2000:]}")
        (out / f"seed-{seed}.json").write_text(result.stdout)
        print(f"seed {seed}: {time.perf_counter() - began:.0f} s", flush=True)


def combine(out: Path) -> dict[str, Any]:
    """The demo's result over every seed file in `out`."""
    files = sorted(out.glob("seed-*.json"), key=lambda path: int(path.stem.split("-")[1]))
    if not files:
        sys.exit(f"no seed-*.json in {out}")
    by_arm: dict[str, list[ArmRun]] = {}
    seconds = 0.0
    settings: dict[str, Any] = {}
    for path in files:
        result = json.loads(path.read_text())
        settings = result["settings"]
        seconds += result["seconds"]
        for key, arm in result["arms"].items():
            shape = Arm(key, arm["recipe"], arm["batch"], grouped=arm["grouped"])
            for seed in arm["seeds"]:
                rows = [StepRow(**row) for row in seed["steps"]]
                scores = seed["before_scores"], seed["after_scores"]
                run = ArmRun(shape, seed["seed"], rows, *scores, seed["seconds"], seed.get("phases", {}))
                by_arm.setdefault(key, []).append(run)
    settings = {**settings, "seed": min(run.seed for runs in by_arm.values() for run in runs), "seeds": len(files)}
    return result_json(by_arm, [], settings, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--combine", action="store_true", help="print the result over the seeds in --out")
    args, extra = parser.parse_known_args()
    if args.combine:
        print(json.dumps(combine(args.out), indent=2))
    else:
        run_seeds(args.seed, args.seeds, args.out, extra)


if __name__ == "__main__":
    main()
