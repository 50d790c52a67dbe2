"""Which sampling defaults suit the embedded model: the question set under candidate settings.

Every question of `bench/questions.jsonl` is asked once per candidate through the embedded runtime in this process
(chat completions, no system prompt, a fixed seed per question), `--concurrency` questions at a time (decoded
together). An answer is correct when it holds
an accepted answer as a whole word (case-insensitive unless the question says `case`); questions marked `exact`
must be answered by the accepted text alone (surrounding punctuation aside). Per candidate: the correct rate, the
mean answer length in tokens, how many answers ran into the length cap, and the time per answer (the candidate's
wall time over the number of questions, so it also counts the answers' lengths).

The `greedy-fp32` candidate decodes on the fp32 weights (transformers' forward pass, without the decode copies of
`precision.py` or the native step): against `greedy` (the default copies, `auto`: 8-bit copies that are the GGUF's
weights exactly) and `greedy-fp16` (`embedded.decode-weights fp16`, a runtime of its own) it shows what serving from
each kind of copies costs in answers.

    .venv/bin/python bench/embedded_defaults.py [--state-dir DIR] [--max-tokens 192] [--concurrency 4]
        [--only greedy,card]

Prints a markdown table and writes bench/results/<time>-defaults.json. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_daemon.runtimes.embedded import EmbeddedRuntime, precision
from reef_daemon.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "bench" / "questions.jsonl"
ROUTE = "/v1/chat/completions"


@dataclass(frozen=True)
class Candidate:
    name: str
    temperature: float
    top_p: float
    weights: str = "auto"  # what decodes: the default copies, fp16 ones, or the fp32 weights themselves


CANDIDATES = [
    Candidate("greedy", 0.0, 1.0),
    Candidate("greedy-fp32", 0.0, 1.0, weights="fp32"),
    Candidate("greedy-fp16", 0.0, 1.0, weights="fp16"),
    Candidate("card", 0.2, 0.9),  # the model card's example: temperature 0.2, top-p 0.9
    Candidate("t0.5-p0.9", 0.5, 0.9),
    Candidate("t0.7-p0.95", 0.7, 0.95),
    Candidate("t1-p1", 1.0, 1.0),  # the old default, and what on-policy training samples with
]


def correct(answer: str, question: dict[str, Any]) -> bool:
    flags = 0 if question.get("case") else re.IGNORECASE
    if question.get("exact"):
        core = answer.strip().strip(".!\"'`*").strip()
        return any(re.fullmatch(re.escape(accepted), core, flags) for accepted in question["accept"])
    return any(re.search(rf"(?<!\w){re.escape(accepted)}(?!\w)", answer, flags) for accepted in question["accept"])


async def ask(runtime: EmbeddedRuntime, prompt: str, candidate: Candidate, seed: int, cap: int) -> dict[str, Any]:
    payload = {
        "model": "reef",
        "messages": [{"role": "user", "content": prompt}],
        "temperature": candidate.temperature,
        "top_p": candidate.top_p,
        "max_tokens": cap,
        "seed": seed,
    }
    began = time.perf_counter()
    answer = await runtime.send(ROUTE, json.dumps(payload).encode(), payload, {})
    body = json.loads(await answer.read())
    took = time.perf_counter() - began
    choice = body["choices"][0]
    return {
        "text": choice["message"]["content"],
        "tokens": body["usage"]["completion_tokens"],
        "capped": choice["finish_reason"] == "length",
        "s": took,
    }


async def run(state_dir: Path | None, cap: int, concurrency: int, only: set[str] | None) -> dict[str, Any]:
    questions = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    results: dict[str, Any] = {
        "questions": len(questions), "max_tokens": cap, "concurrency": concurrency, "candidates": {}
    }  # fmt: skip
    chosen = [c for c in CANDIDATES if not only or c.name in only]
    for copies in ("auto", "fp16"):  # a runtime per kind of decoding copies; fp32 candidates use the default one's
        served = [c for c in chosen if (c.weights == "fp16") == (copies == "fp16")]
        if not served:
            continue
        overrides = {"embedded.decode-weights": copies}
        if state_dir:
            overrides["reef.state-dir"] = str(state_dir)
        runtime = EmbeddedRuntime(load_settings(overrides=overrides, environ={}))
        await runtime.start()
        try:
            for candidate in served:
                summary = await ask_all(runtime, candidate, questions, cap, concurrency)
                results["candidates"][candidate.name] = summary
                print(render_row(candidate.name, summary), flush=True)
        finally:
            await runtime.close()
    return results


async def ask_all(
    runtime: EmbeddedRuntime, candidate: Candidate, questions: list[dict[str, Any]], cap: int, concurrency: int
) -> dict[str, Any]:
    gate = asyncio.Semaphore(concurrency)

    async def one(seed: int, question: dict[str, Any]) -> dict[str, Any]:
        async with gate:
            reply = await ask(runtime, question["prompt"], candidate, seed, cap)
        reply.update(id=question["id"], correct=correct(reply["text"], question))
        print(f"{candidate.name} {question['id']}: {reply['tokens']} tokens, {reply['s']:.1f} s", file=sys.stderr)
        return reply

    worker = runtime.engine._worker  # type: ignore[attr-defined]  # the torch engine's generation thread
    native = worker._native
    if candidate.weights == "fp32":  # transformers' forward pass on the fp32 weights: no copies, no native step
        precision.DECODE_ROWS, worker._native = 0, None
    try:
        began = time.perf_counter()
        answers = await asyncio.gather(*(one(seed, q) for seed, q in enumerate(questions)))
    finally:
        precision.DECODE_ROWS, worker._native = 4, native
    return {
        "temperature": candidate.temperature,
        "top_p": candidate.top_p,
        "correct": sum(a["correct"] for a in answers) / len(answers),
        "mean_tokens": statistics.mean(a["tokens"] for a in answers),
        "capped": sum(a["capped"] for a in answers),
        "s_per_answer": (time.perf_counter() - began) / len(answers),
        "answers": answers,
    }


def render_row(name: str, row: dict[str, Any]) -> str:
    return (
        f"| {name} | {row['temperature']:g} | {row['top_p']:g} | {row['correct']:.0%} | {row['mean_tokens']:.1f} "
        f"| {row['capped']} | {row['s_per_answer']:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, help="a state directory holding the model cache (default: reef's)")
    parser.add_argument("--max-tokens", type=int, default=192, help="the length cap of every answer")
    parser.add_argument("--concurrency", type=int, default=4, help="questions asked at a time")
    parser.add_argument("--only", help="comma-separated candidate names")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    print("| candidate | temperature | top-p | correct | mean tokens | capped | s per answer |")
    print("|---|---|---|---|---|---|---|")
    results = asyncio.run(run(args.state_dir, args.max_tokens, args.concurrency, only))
    out = ROOT / "bench" / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}-defaults.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, ensure_ascii=False))
    print(f"\nwritten: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
