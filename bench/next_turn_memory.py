"""The daemon's memory while many requests carry long conversations of short turns, with the next-turn judge on and
off: what the judge keeps to match a next turn is bounded in bytes (`reports.next-turn-memory`), whatever the
conversations' lengths.

Each run is a process of its own (RSS is the process's): reef (the `record` recipe), the fake upstream and the
scripted judge of the tests, on loopback. It sends `--requests` requests, each a conversation of `--turns` short
turns under a session of its own, waits until the judge has read them all, and prints the resident memory before
and after and what the judge keeps.

    .venv/bin/python bench/next_turn_memory.py [--requests 100] [--turns 60001]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reef_daemon.settings import load_settings
from tests.support.app_servers import AppServers, url_of
from tests.support.fake_judge import FakeJudge
from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import Reef


def resident_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run(judged: bool, requests: int, turns: int) -> None:
    servers = AppServers()
    try:
        with tempfile.TemporaryDirectory() as folder:
            upstream = FakeUpstream(max_body=256 * 1024**2)
            overrides = {
                "reef.state-dir": folder,
                "inference.upstream-url": url_of(await servers.serve(upstream.app())),
                "reports.next-turn": "on" if judged else "off",
                "reports.judge-url": url_of(await servers.serve(FakeJudge().app())),
            }
            server = await servers.reef(load_settings(overrides=overrides, environ={}))
            session = aiohttp.ClientSession()
            servers.close_later(session.close)
            reef = Reef(url_of(server), server, upstream, session)
            before = resident_mib()
            for number in range(requests):
                roles = ("user", "assistant")
                messages = [{"role": roles[n % 2], "content": f"turn {number}.{n}"} for n in range(turns)]
                body = {"model": "fake-model", "messages": messages}
                response = await reef.post("/v1/chat/completions", body, headers={"x-reef-tag-session": f"s{number}"})
                assert response.status == 200, await response.text()
                upstream.received.clear()  # the fake keeps what it receives; the daemon is what is measured
            judge = reef.daemon.next_turn
            while judge is not None and judge.counts.unmatched < requests:
                await asyncio.sleep(0.1)
            gc.collect()
            kept = f"{judge.counts.kept_bytes:,} bytes kept to match" if judge is not None else "judge off"
            print(f"judge {'on ' if judged else 'off'}: RSS {before:.0f} -> {resident_mib():.0f} MiB; {kept}")
    finally:
        await servers.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--turns", type=int, default=60001, help="turns a request carries (user, assistant, ...)")
    parser.add_argument("--judged", choices=("on", "off"), help="one run in this process (otherwise both, each alone)")
    options = parser.parse_args()
    if options.judged:
        asyncio.run(run(options.judged == "on", options.requests, options.turns))
        return
    for judged in ("off", "on"):
        arguments = ["--requests", str(options.requests), "--turns", str(options.turns), "--judged", judged]
        subprocess.run([sys.executable, __file__, *arguments], check=True)


if __name__ == "__main__":
    main()
