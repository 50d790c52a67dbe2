"""SAO training benchmark on the embedded model: step time for a 256-token rollout, swap time, peak RSS during
training, and requests served while a step runs.

Starts `reef serve --recipe sao` in the background (a temporary state directory; the model cache of
`reef demo sao`, ~/.cache/reef/models), then for each step: asks for a 256-token rollout, reports a score, and waits
for the step to be committed. Quiet steps measure the step alone; loaded steps keep `--load-workers` clients
sending short chat completions until the step is committed and count what was served and refused. RSS is the
daemon's (`/proc/PID/status`), sampled every 50 ms.

    .venv/bin/python bench/sao_training.py [--quiet-steps 3] [--loaded-steps 3] [--load-workers 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reef_cli.daemon_process import start_daemon, stop_daemon
from reef_cli.demo_run import model_cache
from reef_cli.state import DaemonFiles
from reef_client import ReefClient, ReefClientError

SCENARIO = "bench"
LOAD_SCENARIO = "bench-load"
ROLLOUT_TOKENS = 256
PROMPT = "Write a long, detailed story about a lighthouse keeper and a storm."
SETTINGS = ["--training.critic-warmup-steps", "0", "--training.checkpoint-every", "1000"]


@dataclass
class Step:
    output_tokens: int
    generate_s: float
    report_to_commit_s: float  # from the report to the committed step, as a client sees it
    train_time_s: float
    swap_s: float
    peak_rss_mib: float  # while the step ran
    served: int = 0  # short requests answered between the report and the commit
    served_while_training: int = 0  # of those, answered while /reef/status showed the step running
    refused: int = 0


@dataclass
class Result:
    steps: list[Step] = field(default_factory=list)
    hwm_rss_mib: float = 0.0
    machine: str = ""


def rss_mib(pid: int, key: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Load:
    """Clients in threads sending short chat completions until stopped; every answer's end time and outcome."""

    def __init__(self, url: str, workers: int) -> None:
        self.url = url
        self.workers = workers
        self.done: list[tuple[float, bool]] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Load:
        self._threads = [threading.Thread(target=self._loop, args=(n,)) for n in range(self.workers)]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _loop(self, worker: int) -> None:
        with ReefClient(self.url, timeout_s=120) as client:
            seed = worker * 1_000_000
            while not self._stop.is_set():
                seed += 1
                messages = [{"role": "user", "content": "Say hello."}]
                try:
                    client.chat(LOAD_SCENARIO, messages, max_tokens=8, seed=seed)
                    self.done.append((time.monotonic(), True))
                except ReefClientError:
                    self.done.append((time.monotonic(), False))


def long_rollout(client: ReefClient, seed: int) -> tuple[str, int, float]:
    """A rollout of ROLLOUT_TOKENS tokens (seeds are tried until one does not stop early)."""
    for attempt in range(20):
        began = time.perf_counter()
        reply = client.chat(
            SCENARIO, [{"role": "user", "content": PROMPT}], max_tokens=ROLLOUT_TOKENS, seed=seed + attempt
        )
        elapsed = time.perf_counter() - began
        tokens = len(client.record(reply.receipt)["tokens"]["output_ids"])
        if tokens == ROLLOUT_TOKENS:
            return reply.receipt, tokens, elapsed
    return reply.receipt, tokens, elapsed


def run_step(client: ReefClient, pid: int, number: int, load: Load | None) -> Step:
    receipt, tokens, generate_s = long_rollout(client, number * 100)
    peak = [rss_mib(pid)]
    window: list[float] = []
    began = time.perf_counter()
    start = time.monotonic()
    client.report(SCENARIO, [receipt], score=1.0 if number % 2 else -1.0)
    while True:
        state = client.status()["training"]["scenarios"].get(SCENARIO) or {}
        peak.append(rss_mib(pid))
        if state.get("running_since") is not None and not window:
            window.append(time.monotonic())
        if state.get("steps", 0) >= number and state.get("running_since") is None:
            break
        time.sleep(0.05)
    end = time.monotonic()
    metrics = state["last_step"]["metrics"]
    step = Step(
        tokens,
        round(generate_s, 3),
        round(time.perf_counter() - began, 3),
        float(metrics["train_time_s"]),
        float(metrics.get("swap_s", 0.0)),
        round(max(peak), 1),
    )
    if load is not None:
        served = [(at, ok) for at, ok in load.done if start <= at <= end]
        step.served = sum(ok for _, ok in served)
        step.refused = sum(not ok for _, ok in served)
        step.served_while_training = sum(ok for at, ok in served if window and at >= window[0])
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quiet-steps", type=int, default=3)
    parser.add_argument("--loaded-steps", type=int, default=3)
    parser.add_argument("--load-workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = Result(machine=f"{platform.machine()} {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="reef-bench-sao-") as tmp:
        state = Path(tmp)
        model_cache().mkdir(parents=True, exist_ok=True)
        (state / "models").symlink_to(model_cache(), target_is_directory=True)
        serve = ["--recipe", "sao", "--reef.state-dir", str(state), "--reef.port", "0", *SETTINGS]
        started = start_daemon(DaemonFiles(state), serve, "127.0.0.1", 0)
        try:
            with ReefClient(started.url, timeout_s=600) as client:
                for number in range(1, args.quiet_steps + 1):
                    result.steps.append(run_step(client, started.pid, number, None))
                    print("quiet ", asdict(result.steps[-1]), flush=True)
                for number in range(args.quiet_steps + 1, args.quiet_steps + args.loaded_steps + 1):
                    with Load(started.url, args.load_workers) as load:
                        result.steps.append(run_step(client, started.pid, number, load))
                    print("loaded", asdict(result.steps[-1]), flush=True)
            result.hwm_rss_mib = round(rss_mib(started.pid, "VmHWM"), 1)
        finally:
            stop_daemon(started.pid)
    report(result, args.quiet_steps)
    if args.out is not None:
        args.out.write_text(json.dumps(asdict(result), indent=2))


def report(result: Result, quiet: int) -> None:
    quiet_steps, loaded = result.steps[:quiet], result.steps[quiet:]

    def median(values: list[float]) -> float:
        return round(statistics.median(values), 3) if values else float("nan")

    summary: dict[str, Any] = {
        "step train_time_s (quiet, median)": median([s.train_time_s for s in quiet_steps]),
        "report-to-commit s (quiet, median)": median([s.report_to_commit_s for s in quiet_steps]),
        "step train_time_s (loaded, median)": median([s.train_time_s for s in loaded]),
        "swap ms (median / max)": f"{median([s.swap_s * 1000 for s in result.steps])} / "
        f"{max(s.swap_s * 1000 for s in result.steps):.1f}",
        "generate 256 tokens s (median)": median([s.generate_s for s in result.steps]),
        "peak RSS during training MiB": max(s.peak_rss_mib for s in result.steps),
        "daemon VmHWM MiB": result.hwm_rss_mib,
        "served during loaded steps": sum(s.served for s in loaded),
        "served while a step was running": sum(s.served_while_training for s in loaded),
        "refused": sum(s.refused for s in loaded),
    }
    print("\n| figure | value |\n|---|---|")
    for key, value in summary.items():
        print(f"| {key} | {value} |")


if __name__ == "__main__":
    main()
