"""Benchmark of exporting large records: the daemon's peak memory while it exports N records of SIZE MB each.

N conversations (two prompts, so `preference` finds pairs; each answer SIZE MB of text, with a score) are imported
into a fresh daemon (`reef start` in a temporary directory, no upstream needed); the daemon is restarted, so the
import's memory is not counted, and the scenario is exported as `openai` and as `preference`. For each export:
wall time and the daemon's peak RSS (VmHWM, reset before each phase through /proc/PID/clear_refs). An export
reads `reef.export-page-mb` of stored records at a time, so its peak should stay near that page plus a few
copies of one record, whatever N:

    .venv/bin/python bench/export_large_records.py [--records 200] [--size-mb 4]

Prints a markdown table and writes bench/results/<time>-export-large-records.json. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REEF = [sys.executable, "-m", "reef_cli"]


def reef(args: list[str], cwd: Path) -> float:
    """Run a reef command; its wall time (exit on failure)."""
    began = time.perf_counter()
    done = subprocess.run([*REEF, *args], cwd=cwd, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"reef {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - began


def start(work: Path) -> int:
    reef(["start", "--inference.upstream-url", "http://127.0.0.1:9", "--reef.port", "0"], work)
    return int((work / ".reef" / "daemon.pid").read_text())


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--size-mb", type=float, default=4.0)
    options = parser.parse_args()
    size = int(options.size_mb * 2**20)
    with tempfile.TemporaryDirectory(prefix="reef-bench-export-") as folder:
        work = Path(folder)
        source = work / "large.jsonl"
        with source.open("w") as out:
            for index in range(options.records):
                answer = f"{index} " + "lorem ipsum " * (size // 12)
                messages = [
                    {"role": "user", "content": f"prompt {index % 2}"},
                    {"role": "assistant", "content": answer},
                ]
                out.write(json.dumps({"messages": messages, "score": (index % 10) / 10}) + "\n")
        pid = start(work)
        try:
            reef(["import", str(source), "--scenario", "large"], work)
            reef(["stop", "--state-dir", ".reef"], work)
            pid = start(work)
            idle = peak_mib(pid)
            phases: dict[str, dict[str, float]] = {}
            for name, format in (("export openai", "openai"), ("export preference", "preference")):
                Path(f"/proc/{pid}/clear_refs").write_text("5")
                seconds = reef(["export", "--scenario", "large", "--format", format, "-o", str(work / format)], work)
                phases[name] = {"seconds": round(seconds, 2), "daemon_peak_rss_mib": round(peak_mib(pid), 1)}
        finally:
            subprocess.run([*REEF, "stop", "--state-dir", ".reef"], cwd=work, capture_output=True, timeout=120)
    result = {"records": options.records, "size_mb": options.size_mb, "daemon_idle_rss_mib": round(idle, 1),
              "phases": phases}  # fmt: skip
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / f"{time.strftime('%Y%m%d-%H%M%S')}-export-large-records.json").write_text(json.dumps(result, indent=2))
    print(f"| {options.records} records of {options.size_mb:g} MB (daemon idle {idle:.0f} MiB) | s |"
          " daemon peak RSS MiB |")  # fmt: skip
    print("|---|---|---|")
    for name, phase in phases.items():
        print(f"| {name} | {phase['seconds']} | {phase['daemon_peak_rss_mib']} |")


if __name__ == "__main__":
    main()
