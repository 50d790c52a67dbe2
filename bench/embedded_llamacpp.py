"""reef beside llama.cpp on the same GGUF and the same cores: greedy decoding tokens/s, one stream and four.

In one run, one after the other on the same machine:
1. reef: `reef serve` on a temporary state directory, greedy chat streams over HTTP (`embedded_model.py`'s client):
   one at a time, then four at once. A stream's tokens/s is from its first text delta to its last; four streams'
   aggregate is the sum of theirs (they decode together). Once with the default decoding copies (`auto`: 8-bit
   copies that are the GGUF's weights exactly), once with fp16 ones (`--embedded.decode-weights fp16`).
2. llama.cpp: llama-cpp-python in a venv of its own (bench/.venv-llamacpp, built from PyPI on first use; a few
   minutes), on the GGUF reef's embedded model is converted from, with as many threads as cores:
   `llamacpp_decode.py`, one sequence, then four decoded together in one batch, tokens/s defined the same way.
The median of `--rounds`; prints a markdown table and the ratios (reef / llama.cpp).

    .venv/bin/python bench/embedded_llamacpp.py [--tokens 128] [--rounds 3]

Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from embedded_model import PROMPT, free_port, serve_phase, start_daemon, wait_ready

from reef_daemon.runtimes.embedded.loading import resolve_source

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-llamacpp"


def llamacpp_python() -> Path:
    """The interpreter of the llama.cpp venv, made (and llama-cpp-python built) if it is not there."""
    python = VENV / "bin" / "python"
    if python.is_file() and subprocess.run([python, "-c", "import llama_cpp"], check=False).returncode == 0:
        return python
    print(f"building llama-cpp-python into {VENV} (a few minutes, once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "llama-cpp-python"], check=True)
    return python


def reef_rates(tokens: int, rounds: int, decode_weights: str) -> dict[str, float]:
    state = Path(tempfile.mkdtemp(prefix="reef-bench-llamacpp-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    daemon = start_daemon(state, port, "--embedded.decode-weights", decode_weights)
    try:
        wait_ready(url, daemon)
        served = asyncio.run(serve_phase(url, rounds, tokens, 4))
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
    return {
        "one": statistics.median(stream["tok_s"] for stream in served["single"]),
        "four": statistics.median(sum(s["tok_s"] for s in batch["streams"]) for batch in served["concurrent"]),
    }


def llamacpp_rates(tokens: int, rounds: int) -> dict[str, Any]:
    gguf = resolve_source(None).path
    command = [
        str(llamacpp_python()), str(HERE / "llamacpp_decode.py"), "--gguf", str(gguf), "--prompt", PROMPT,
        "--threads", str(os.cpu_count() or 1), "--tokens", str(tokens), "--rounds", str(rounds), "--streams", "1", "4",
    ]  # fmt: skip
    said = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    return {"one": said["1"]["tok_s"], "four": said["4"]["aggregate_tok_s"], "version": said["llama_cpp"],
            "gguf": gguf.name}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    llamacpp_python()  # built before anything is timed
    auto = reef_rates(args.tokens, args.rounds, "auto")
    fp16 = reef_rates(args.tokens, args.rounds, "fp16")
    llama = llamacpp_rates(args.tokens, args.rounds)
    print(f"{os.cpu_count()} CPUs; {llama['gguf']}; llama-cpp-python {llama['version']}; {args.tokens} greedy tokens\n")
    print("| decoding tokens/s | reef (default) | reef, fp16 | llama.cpp | reef / llama.cpp | fp16 / llama.cpp |")
    print("|---|---|---|---|---|---|")
    for key, name in (("one", "one stream"), ("four", "four streams together (aggregate)")):
        print(
            f"| {name} | {auto[key]:.1f} | {fp16[key]:.1f} | {llama[key]:.1f} | {auto[key] / llama[key]:.2f}x"
            f" | {fp16[key] / llama[key]:.2f}x |"
        )


if __name__ == "__main__":
    main()
