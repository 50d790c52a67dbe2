"""Benchmark of records in and out: `reef import` and `reef export` of N conversations (100k by default).

A generated OpenAI chat JSONL file (each conversation: system, user, an assistant tool call, its result and the
answer, with a score; ~1 KiB) is imported into a fresh daemon (`reef start` in a temporary directory, no upstream
needed), then exported as `openai` and as `preference`. For each phase: wall time, records/s, and the peak RSS
of the CLI process (ru_maxrss from wait4) and of the daemon (VmHWM, reset before each phase through
/proc/PID/clear_refs). Run it at two sizes to see that memory does not grow with the import:

    .venv/bin/python bench/records_io.py [--records 100000]

Prints a markdown table and writes bench/results/<time>-records-io.json. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REEF = [sys.executable, "-m", "reef_cli"]


def conversation(index: int) -> dict[str, Any]:
    prompt = index % 5000  # each prompt is asked 20 times over 100k, so `preference` finds pairs
    city = f"city-{prompt}"
    arguments = json.dumps({"city": city})
    call = {"id": f"call_{prompt}", "type": "function", "function": {"name": "weather", "arguments": arguments}}
    return {
        "messages": [
            {"role": "system", "content": "You are a helpful assistant. Answer briefly and use tools when needed."},
            {"role": "user", "content": f"What is the weather in {city} today? Please check before answering."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": f"{city}: sunny, {prompt % 35} C, light wind"},
            {"role": "assistant", "content": f"It is sunny in {city}, {index % 35} C with a light wind. ({index})"},
        ],
        "score": (index // 5000 % 10) / 10,  # the askings of one prompt differ in score
    }


def run(args: list[str], cwd: Path) -> tuple[float, float, float, str]:
    """Run a reef command; its wall time, its peak RSS in MiB, its CPU seconds, and its stderr."""
    began = time.perf_counter()
    process = subprocess.Popen([*REEF, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - began
    stdout, stderr = process.communicate()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"reef {' '.join(args)} failed:\n{stdout}\n{stderr}")
    return elapsed, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, stderr


def daemon_peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def daemon_cpu_s(pid: int) -> float:
    """User + system CPU seconds of the daemon so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reef-bench-io-") as folder:
        work = Path(folder)
        source = work / "sessions.jsonl"
        with source.open("w") as out:
            for index in range(options.records):
                out.write(json.dumps(conversation(index)) + "\n")
        source_mib = round(source.stat().st_size / 2**20, 1)
        started = subprocess.run(
            [*REEF, "start", "--inference.upstream-url", "http://127.0.0.1:9", "--reef.port", "0"],
            cwd=work, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if started.returncode != 0:
            raise SystemExit(started.stderr)
        pid = int((work / ".reef" / "daemon.pid").read_text())
        phases: dict[str, dict[str, float]] = {}
        try:
            for name, args in (
                ("import", ["import", str(source), "--scenario", "bench"]),
                ("export openai", ["export", "--scenario", "bench", "-o", str(work / "openai.jsonl")]),
                ("export preference", ["export", "--scenario", "bench", "--format", "preference",
                                       "-o", str(work / "preference.jsonl")]),
            ):  # fmt: skip
                reset_peak(pid)
                daemon_cpu = daemon_cpu_s(pid)
                elapsed, cli_mib, cli_cpu, said = run(args, work)
                phases[name] = {
                    "seconds": round(elapsed, 2),
                    "records_per_s": round(options.records / elapsed),
                    "cli_peak_rss_mib": round(cli_mib, 1),
                    "cli_cpu_s": round(cli_cpu, 2),
                    "daemon_cpu_s": round(daemon_cpu_s(pid) - daemon_cpu, 2),
                    "daemon_peak_rss_mib": round(daemon_peak_mib(pid), 1),
                }
                print(f"{name}: {said.strip().splitlines()[-1]}", file=sys.stderr)
            lines = sum(1 for _ in (work / "openai.jsonl").open())
            assert lines == options.records, f"exported {lines} of {options.records}"
        finally:
            subprocess.run([*REEF, "stop", "--state-dir", ".reef"], cwd=work, capture_output=True, timeout=120)
    result = {"records": options.records, "source_mib": source_mib, "phases": phases}
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / f"{time.strftime('%Y%m%d-%H%M%S')}-records-io.json").write_text(json.dumps(result, indent=2))
    print(f"| {options.records} records ({source_mib} MiB) | s | records/s | CLI CPU s | daemon CPU s |"
          " CLI peak RSS MiB | daemon peak RSS MiB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, phase in phases.items():
        print(f"| {name} | {phase['seconds']} | {phase['records_per_s']} | {phase['cli_cpu_s']} |"
              f" {phase['daemon_cpu_s']} | {phase['cli_peak_rss_mib']} | {phase['daemon_peak_rss_mib']} |")  # fmt: skip


if __name__ == "__main__":
    main()
