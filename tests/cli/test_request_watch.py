"""Following a change request: the lines a person reads while it runs, the caution on the small embedded model,
and how long the wait lasts."""

from __future__ import annotations

from reef_client import ProgressLines, small_model_caution, wait_bound
from reef_contract import Activity, RequestProgress, RuntimeStatus

EMBEDDED: RuntimeStatus = {
    "kind": "embedded",
    "engine": "torch",
    "model": "SmolLM2-135M-Instruct",
    "parameters": 134_515_008,
}
UPSTREAM: RuntimeStatus = {"kind": "http", "model": "qwen3-coder", "url": "http://127.0.0.1:11434"}


def progress(state: str, *texts: str) -> RequestProgress:
    activity: list[Activity] = [{"at": 0.0, "text": text} for text in texts]
    return {"id": "r1", "scenario": "s", "text": "x", "session": None, "created_at": 0.0, "state": state,
            "activity": activity, "design": None}  # fmt: skip


def test_activity_is_shown_as_it_comes_and_silence_says_it_is_still_at_work() -> None:
    now = [0.0]
    lines = ProgressLines(quiet_s=30, clock=lambda: now[0])
    assert lines(progress("queued"), []) == []
    now[0] = 5
    first = progress("proposing", "plan: 3 step(s)")
    assert lines(first, first["activity"]) == ["· plan: 3 step(s)"]
    now[0] = 34
    assert lines(first, []) == []
    now[0] = 36
    assert lines(first, []) == ["· still proposing after 36 s (last: plan: 3 step(s))"]
    now[0] = 50
    assert lines(first, []) == []  # the next one comes after another quiet spell
    now[0] = 130
    assert lines(first, []) == ["· still proposing after 2 min 10 s (last: plan: 3 step(s))"]
    assert lines(progress("settled", "plan: 3 step(s)"), []) == []


def test_the_small_embedded_model_is_named_before_the_wait_and_bounds_it() -> None:
    caution = small_model_caution(EMBEDDED)
    assert caution is not None and "harness changes need a capable model" in caution
    assert "--inference.upstream-url URL" in caution
    assert small_model_caution(UPSTREAM) is None
    assert small_model_caution({**EMBEDDED, "engine": "sglang"}) is None  # a server of the person's model
    assert small_model_caution({**EMBEDDED, "parameters": 7_000_000_000}) is None
    assert (wait_bound(None, EMBEDDED), wait_bound(None, UPSTREAM), wait_bound(90, EMBEDDED)) == (600, 1800, 90)
