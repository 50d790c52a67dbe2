"""The base pass rate of each capital question of the toy task, on the embedded model as first served: how
`reef demo sao`'s held-out questions were chosen (those between 5 % and 60 % at temperature 1).

Starts `reef serve --recipe record` on the embedded model (a temporary state directory, the user's model cache),
asks every question of `recipes/sao/examples/toy/task.py` (`CAPITALS`) `--samples` times at temperature 1 with
the demo's `max_tokens` and seeds drawn from `--seed`, scores each answer by the task's rule, and prints one JSON
line per question, lowest rate first.

    nice -n 10 .venv/bin/python bench/sao_base_rates.py [--samples 16] [--workers 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from recipes.sao.examples.toy import task
from reef_cli.daemon_process import start_daemon, stop_daemon
from reef_cli.demo_run import model_cache
from reef_cli.state import DaemonFiles
from reef_client import ReefClient


def ask(url: str, country: str, seed: int) -> float:
    prompt = task.Prompt(country)
    with ReefClient(url, timeout_s=300) as client:
        messages = [{"role": "user", "content": prompt.text}]
        reply = client.chat("base-rates", messages, temperature=1.0, seed=seed, max_tokens=task.MAX_TOKENS)
    return task.score(prompt, reply.text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    draw = random.Random(args.seed)
    asks = [(country, draw.randrange(2**31)) for country in task.CAPITALS for _ in range(args.samples)]
    with tempfile.TemporaryDirectory(prefix="reef-bench-base-rates-") as tmp:
        state = Path(tmp)
        model_cache().mkdir(parents=True, exist_ok=True)
        (state / "models").symlink_to(model_cache(), target_is_directory=True)
        serve = ["--recipe", "record", "--reef.state-dir", str(state), "--reef.port", "0"]
        started = start_daemon(DaemonFiles(state), serve, "127.0.0.1", 0)
        try:
            with ThreadPoolExecutor(args.workers) as pool:
                scores = list(pool.map(lambda pair: ask(started.url, *pair), asks))
        finally:
            stop_daemon(started.pid)
    rates: dict[str, list[float]] = {}
    for (country, _seed), score in zip(asks, scores, strict=True):
        rates.setdefault(country, []).append(score)
    rows = sorted(
        ({"country": c, "rate": sum(s) / len(s), "samples": len(s)} for c, s in rates.items()),
        key=lambda row: (row["rate"], row["country"]),
    )
    lines = [json.dumps(row) for row in rows]
    print("\n".join(lines))
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
