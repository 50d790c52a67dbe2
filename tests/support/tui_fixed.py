"""A daemon client with fixed answers (fixed ids and times), so snapshots of the app's screens are the same on
every run. Only for tests: the product talks to a real daemon."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from functools import cache
from typing import Any

from reef_client import Event, RecordPage, RecordRow, ReefClient, ReportAck

T0 = 1767268800.0  # 2026-01-01 12:00:00 UTC
URL = "http://127.0.0.1:8900"
QUESTIONS = [
    "What is the capital of France?",
    "The test in tests/test_parser.py fails with a KeyError on empty input; find why and fix the parser, not the test.",
    "List three prime numbers.",
]
ANSWERS = ["**Paris** is the capital.", "The parser indexes `tokens[0]` before checking for an empty list; I added a "
           "guard that returns an empty tree, and the test passes.", "2, 3 and 5."]  # fmt: skip


def receipt(n: int) -> str:
    """Record n's receipt: 32 hex digits that differ from the first, as the daemon's random ones do."""
    return hashlib.md5(f"record {n}".encode()).hexdigest()


@cache
def number_of(record_id: str) -> int:
    """The n of a receipt made by `receipt`."""
    return next(n for n in range(1000) if receipt(n) == record_id)


def row(n: int) -> RecordRow:
    """Inference record n: a chat in scenario demo, every third one scored."""
    return {
        "sequence": n,
        "id": receipt(n),
        "scenario": "demo" if n % 4 else "ci",
        "type": "inference",
        "created_at": T0 + 60 * n,
        "route": "/v1/chat/completions" if n % 2 else "/v1/messages",
        "model": "fake-model",
        "status": 200 if n % 7 else 502,
        "complete": True,
        "duration_ms": 120.0 + 17 * n,
        "usage": {"input_tokens": 12 + n, "output_tokens": 7 + n},
        "score": [None, 0.75, None][n % 3],
        "release": None,
        "preview": {"asked": QUESTIONS[n % 3], "answered": ANSWERS[n % 3] if n % 7 else None},
    }


def detail(n: int) -> dict[str, Any]:
    question, text = QUESTIONS[n % len(QUESTIONS)], ANSWERS[n % len(ANSWERS)]
    return {
        **row(n),
        "request": {"model": "fake-model", "messages": [{"role": "user", "content": question}]},
        "response": {
            "id": "chatcmpl-fixed",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        },
        "answer": {
            "model": "fake-model",
            "parts": [{"type": "text", "text": text}],
            "finish_reason": "stop",
            "usage": row(n)["usage"],
        }
        if n % 7
        else None,
        "error": None if n % 7 else "the upstream answered 502",
        "timings": {"ttft_ms": 80.0, "duration_ms": row(n)["duration_ms"], "overhead_ms": 0.42},
        "tags": {"session": "s-1"},
        "reports": [{"id": receipt(900 + n), "created_at": T0 + 3600, "score": 0.75, "feedback": "good and short"}],
    }


EVIDENCE = {
    "passed": True, "ran": True, "served": "r1", "seconds": 41.5, "model_calls": 9,
    "reason": "the behaviour check passed; 1 protected task(s), none worse beyond 0; 1 task(s) better; 1 replay(s) run",
    "rows": [
        {"task": "behaviour", "kind": "behaviour", "protected": True, "prompt": "Run a long task, then stop.",
         "served": "answered: Done.", "candidate": "answered: Done. (notified)", "verdict": "better",
         "reason": "/notified/ matches the candidate's answer, not the served version's"},
        {"task": "t-1a2b", "kind": "task", "protected": True, "prompt": "What is the capital of France?",
         "served": "answered: Paris.", "candidate": "answered: Paris.", "verdict": "same",
         "reason": "/Paris/ matches both answers"},
        {"task": "r-0c9d", "kind": "replay", "protected": False, "prompt": "tell me when the build ends",
         "served": "answered: I cannot.", "candidate": "answered: I will notify you.", "verdict": "better",
         "reason": "it notifies as asked"},
    ],
}  # fmt: skip


CRITIC = {"value_min": 0.05, "value_max": 0.42, "explained_variance": 0.31, "failed_positive_share": 0.08,
          "window": 12, "warmup_steps_left": 0}  # fmt: skip


def releases(recipe: str) -> list[dict[str, Any]]:
    if recipe == "sao":
        return [
            {"version": f"v{step}", "step": step, "operation": "training", "result": "selected",
             "release_id": f"ckpt{step}", "parent_release_id": f"ckpt{step - 1}", "created_at": T0 + 600 * step,
             "metrics": {"mean_reward": 0.3 + 0.05 * step + 0.1 * (step % 3), "critic_loss": 0.8 / step,
                         "explained_variance": 0.05 * step - 0.1,
                         "weight_version": step, **({"loss": 1.2 / step} if step > 3 else {})},
             "current": step == 12}
            for step in range(12, 0, -1)
        ]  # fmt: skip  # the policy's loss starts after three steps of critic warm-up
    request = {"id": receipt(500), "text": "notify me when a task is done", "session": None}
    return [
        {"version": "v2", "step": 3, "operation": "training", "result": "pending", "release_id": "r2",
         "parent_release_id": "r1", "created_at": T0 + 7200, "metrics": {"attempts": 1, "evidence": EVIDENCE},
         "current": False, "pending": True, "request": request},
        {"version": None, "step": 2, "operation": "training", "result": "skipped", "release_id": None,
         "parent_release_id": "r1", "created_at": T0 + 5400, "metrics": {"reason": "the harness already does this"},
         "current": False, "request": {"id": receipt(450), "text": "answer in English", "session": None}},
        {"version": "v1", "step": 1, "operation": "training", "result": "selected", "release_id": "r1",
         "parent_release_id": "r0", "created_at": T0 + 3600, "metrics": {"attempts": 2}, "current": True,
         "request": {"id": receipt(400), "text": "answer briefly", "session": None}},
        {"version": "v0", "step": 0, "operation": "creation", "result": "selected", "release_id": "r0",
         "parent_release_id": None, "created_at": None, "metrics": {}, "restorable": True, "request": None},
    ]  # fmt: skip


FILES = {
    "r0": {"AGENTS.md": "# Rules\n"},
    "r1": {"AGENTS.md": "# Rules\n", "pi-agent/skills/brief/SKILL.md": "# Be brief\nAnswer in one sentence.\n"},
    "r2": {
        "AGENTS.md": "# Rules\nSay when a task is done.\n",
        "pi-agent/skills/brief/SKILL.md": "# Be brief\nAnswer in one sentence.\n",
        "pi-agent/extensions/notify.ts": "export default () => {}\n",
    },
}

PROGRESS = {
    receipt(500): {"id": receipt(500), "scenario": "demo", "text": "notify me when a task is done",
                   "created_at": T0 + 7000, "state": "settled", "result": "pending", "version": "v2", "release": "r2",
                   "activity": [{"text": "started: planning"}, {"text": "review says it delivers"},
                                {"text": "decided: pending (touches an extension)"}],
                   "how_to_use": "It notifies by itself when a task ends.", "design": "A pi extension."},
    receipt(400): {"id": receipt(400), "scenario": "demo", "text": "answer briefly", "created_at": T0 + 3500,
                   "state": "settled", "result": "selected", "version": "v1", "release": "r1",
                   "activity": [{"text": "started: planning"}, {"text": "decided: selected"}],
                   "how_to_use": "Just ask.", "design": "A skill."},
}  # fmt: skip


def live_score(release_id: str, sessions: int, scored: int, mean: float, trend: list[float | None]) -> dict[str, Any]:
    return {"release_id": release_id, "sessions": sessions, "records": scored + 2, "scored": scored, "mean": mean,
            "interval": {"low": mean - 0.08, "high": mean + 0.08}, "low_share": round(1 - mean, 2),
            "first_at": T0, "last_at": T0 + 7200, "trend": trend}  # fmt: skip


def version_scores(recipe: str) -> dict[str, Any]:
    """v0 served early sessions, v1 serves most now and rises, v2 runs as a 20% canary since the last windows."""
    versions = [] if recipe == "sao" else [
        live_score("r0", 4, 9, 0.48, [0.4, 0.5, 0.55, 0.45, None, None, None, None, None, None, None, None]),
        live_score("r1", 21, 48, 0.71, [None, None, None, None, 0.6, 0.65, 0.7, 0.7, 0.75, 0.8, 0.78, 0.82]),
        live_score("r2", 5, 11, 0.58, [None, None, None, None, None, None, None, None, None, 0.5, 0.62, 0.6]),
    ]  # fmt: skip
    canary = None if recipe == "sao" else {"scenario": "demo", "release_id": "r2", "version": "v2", "share": 20.0,
                                           "served_release_id": "r1", "started_at": T0 + 7300}  # fmt: skip
    return {"scenario": "demo", "score_min": 0.0, "score_max": 1.0, "low_below": 0.5, "confidence": 0.95,
            "method": "student-t", "versions": versions, "canary": canary}  # fmt: skip


class FixedClient(ReefClient):
    """Answers every call the app makes from the tables above; `records` pages like the daemon does."""

    def __init__(self, recipe: str = "reefine", count: int = 30) -> None:
        super().__init__(URL)
        self.recipe = recipe
        self.rows = [row(n) for n in range(count, 0, -1)]

    def status(self) -> dict[str, Any]:
        training = {"demo": {"steps": 12, "last_step": {"step": 12, "version": "v12", "result": "selected",
                             "created_at": T0 + 7200, "metrics": {"weight_version": 12}}, "waiting_units": 1,
                             "ineligible": {"the report has no score": 3, "score below the floor": 1}}}  # fmt: skip
        return {
            "version": "0.1.0",
            "recipe": {
                "name": self.recipe,
                "trains": self.recipe != "record",
                **({"harness": True} if self.recipe == "reefine" else {}),
                **({"critic": CRITIC} if self.recipe == "sao" else {}),
            },
            "runtime": {"kind": "http", "model": "fake-model", "url": "http://127.0.0.1:11434"},
            "scenarios": {"ci": {"recipe": self.recipe}, "demo": {"recipe": self.recipe}},
            "training": {"enabled": True, "scenarios": training},
        }

    def records(self, **query: Any) -> RecordPage:
        rows = [r for r in self.rows if query.get("scenario") in (None, r["scenario"])]
        rows = [r for r in rows if query.get("type") in (None, r["type"])]
        if query.get("type") == "request":
            rows = [{**row(0), "id": key, "type": "request"} for key in PROGRESS]
        if query.get("before") is not None:
            rows = [r for r in rows if r["sequence"] < query["before"]]
        page = rows[: query.get("limit") or 100]
        more = len(rows) > len(page)
        return {"records": page, "next_after": None, "next_before": page[-1]["sequence"] if more else None}

    def record(self, record_id: str) -> dict[str, Any]:
        return detail(number_of(record_id))

    def report(self, scenario: str, references: list[str], **fields: Any) -> ReportAck:
        return {"agent_record_id": receipt(999), "scenario": scenario, "request_type": "report"}

    def events(self, *, after: int | None = None, scenario: str | None = None) -> Iterator[Event]:
        return iter(())

    def releases(self, scenario: str) -> list[dict[str, Any]]:
        return releases(self.recipe)

    def version_scores(self, scenario: str) -> dict[str, Any]:
        return version_scores(self.recipe)

    def request_progress(self, request_id: str) -> dict[str, Any]:
        return PROGRESS[request_id]

    def harness(self, scenario: str, release_id: str | None = None) -> dict[str, Any]:
        release = release_id or "r1"
        parent = {"r2": "r1", "r1": "r0"}.get(release)
        return {"release_id": release, "files": FILES[release], "parent_release_id": parent}

    def adapters(self) -> list[dict[str, Any]]:
        return [{"name": name, "title": name} for name in ("pi", "codex", "dsh")]
