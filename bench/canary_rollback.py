"""How the canary's automatic rollback behaves when it is checked after every report, as the daemon does: the share of
canaries rolled back although they score exactly like the served version (false rollbacks), and how many reports
it takes to roll back a canary that is truly worse.

Pure simulation of the daemon's own rule (`reef_daemon.harness.score_stats.clearly_worse`): each report scores one
record, which belongs to the canary with probability `--share`; both sides start at the canary's start, as the
daemon compares them over the canary's own period.

    .venv/bin/python bench/canary_rollback.py --canaries 1000   # the figures in bench/README.md (~3 min)
    .venv/bin/python bench/canary_rollback.py --canaries 200    # quicker, coarser
    .venv/bin/python bench/canary_rollback.py --interval-rule   # the rule it replaced, for comparison
    .venv/bin/python bench/canary_rollback.py --check-cost 200000   # what one check reads at 200k tagged records
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reef_daemon.harness.score_stats import NO_SCORES, ScoreSums, clearly_worse, summarize
from reef_daemon.harness.tables.live_scores import LiveScoreReader
from reef_daemon.store.engines.opening import open_engine
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.schema import migrate

Draw = Callable[[random.Random, float], float]


def uniform(rng: random.Random, shift: float) -> float:
    return min(1.0, max(0.0, rng.random() - shift))


def binary(rng: random.Random, shift: float) -> float:
    return 1.0 if rng.random() < 0.7 - shift else 0.0


def three_levels(rng: random.Random, shift: float) -> float:
    return rng.choices((0.0, 0.5, 1.0), weights=(0.2 + shift, 0.3, 0.5 - shift))[0]


def skewed(rng: random.Random, shift: float) -> float:
    return min(1.0, max(0.0, rng.betavariate(5, 2) - shift))


DISTRIBUTIONS: dict[str, Draw] = {"uniform": uniform, "binary": binary, "three-levels": three_levels, "skewed": skewed}


def intervals_apart(canary: ScoreSums, served: ScoreSums, least: int, _alpha: float) -> bool:
    """The rule the sequential test replaced: the canary's 95% interval wholly below the served one's."""
    if canary.scored < least or served.scored < least:
        return False
    ours = summarize(canary.scored, canary.total, canary.squares, 0).interval
    theirs = summarize(served.scored, served.total, served.squares, 0).interval
    return ours is not None and theirs is not None and ours[1] < theirs[0]


def run_canary(rng: random.Random, draw: Draw, shift: float, share: float, reports: int, least: int,
               alpha: float, rule: Callable[[ScoreSums, ScoreSums, int, float], bool] = clearly_worse,
               ) -> int | None:  # fmt: skip
    """The report after which the canary was rolled back, or None if it ran all `reports`."""
    canary, served = NO_SCORES, NO_SCORES
    for report in range(1, reports + 1):
        if rng.random() < share:
            canary = canary.add(draw(rng, shift))
        else:
            served = served.add(draw(rng, 0.0))
        if rule(canary, served, least, alpha):
            return report
    return None


def check_cost(records: int) -> None:
    """Seconds one canary check reads for, in a database of `records` tagged, scored records of two releases
    (a fifth the canary's), against the per-version tally of the whole scenario the check used to read."""
    with tempfile.TemporaryDirectory() as folder:
        engine = open_engine(None, Path(folder))
        conn = engine.connect()
        migrate(conn, engine)
        rng = random.Random(1)
        rows = [
            (n, f"r{n}", "demo", "inference", float(n), rng.random(),
             json.dumps({"release": "canary" if rng.random() < 0.2 else "served", "session": f"s{n % 500}"}))
            for n in range(records)
        ]  # fmt: skip
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO records (sequence, id, scenario, type, created_at, score, tags) VALUES (?,?,?,?,?,?,?)", rows
        )
        conn.execute("COMMIT")
        reader = Reader(engine)
        live = LiveScoreReader(reader)
        releases = ["canary", "served"]

        async def timed(what: str, read: Callable[[], Awaitable[object]]) -> None:
            times = []
            for _ in range(5):
                start = time.perf_counter()
                await read()
                times.append(time.perf_counter() - start)
            print(f"| {what} | {statistics.median(times) * 1000:.0f} ms |")

        async def run() -> None:
            print(f"{records} tagged, scored records; median of 5")
            print("| read | time |")
            print("|---|---|")
            await timed("the whole scenario's per-version tally (what each check read before)",
                        lambda: live.tallies("demo", releases, 0.5, 0))  # fmt: skip
            await timed("a check, canary running over all of them", lambda: live.sums("demo", releases, 0.0))
            await timed("a check, canary started 10k records ago",
                        lambda: live.sums("demo", releases, float(records - 10_000)))  # fmt: skip

        asyncio.run(run())
        reader.close()
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--canaries", type=int, default=2000, help="simulated canaries per row")
    parser.add_argument("--reports", type=int, default=2000, help="reports each canary runs for, checked after each")
    parser.add_argument("--share", type=float, default=0.2, help="share of reports that score the canary")
    parser.add_argument("--min-scored", type=int, default=20, help="harness.canary-min-scored")
    parser.add_argument("--alpha", type=float, default=0.005, help="harness.canary-false-rollback")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--interval-rule", action="store_true", help="the rule it replaced, for comparison")
    parser.add_argument("--check-cost", type=int, metavar="RECORDS", help="time one check's read instead")
    args = parser.parse_args()
    if args.check_cost:
        check_cost(args.check_cost)
        return
    rule = intervals_apart if args.interval_rule else clearly_worse
    named = "the interval rule; " if args.interval_rule else ""
    print(f"{named}{args.canaries} canaries per row, {args.reports} reports each, share {args.share:g}, "
          f"min-scored {args.min_scored}, false-rollback {args.alpha:g}")  # fmt: skip
    print("| scores | canary worse by | rolled back | reports to roll back: median | 90th percentile |")
    print("|---|---|---|---|---|")
    for name, draw in DISTRIBUTIONS.items():
        for shift in (0.0, 0.05, 0.1, 0.2):
            rng = random.Random(f"{args.seed}-{name}-{shift}")
            ends = [
                run_canary(rng, draw, shift, args.share, args.reports, args.min_scored, args.alpha, rule)
                for _ in range(args.canaries)
            ]
            caught = sorted(end for end in ends if end is not None)
            rate = len(caught) / len(ends)
            if shift == 0.0 or not caught:
                timing = "-", "-"
            else:
                ninetieth = caught[int(0.9 * len(caught))] if rate >= 0.9 else f">{args.reports}"
                timing = f"{statistics.median(caught):.0f}", str(ninetieth)
            print(f"| {name} | {shift:g} | {rate:.2%} | {timing[0]} | {timing[1]} |")


if __name__ == "__main__":
    main()
