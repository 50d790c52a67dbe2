"""The training screen names each metric's latest value by the step that produced it, also when the first steps
did not report the metric (the policy's loss during critic warm-up)."""

from __future__ import annotations

from typing import Any

from reef_tui.screens.training import metric_series


def step(n: int, **metrics: float) -> dict[str, Any]:
    return {"step": n, "version": f"v{n}", "operation": "training", "result": "selected", "metrics": metrics}


def test_a_metric_missing_from_the_first_steps_is_named_by_its_own_steps() -> None:
    releases = [step(5, loss=0.2, critic_loss=0.1), step(4, loss=0.4, critic_loss=0.2), step(3, critic_loss=0.3),
                step(2, critic_loss=0.5), {**step(1), "operation": "creation"}]  # fmt: skip
    assert metric_series(releases, "loss") == [(4, 0.4), (5, 0.2)]  # type: ignore[arg-type]
    assert [n for n, _value in metric_series(releases, "critic_loss")] == [2, 3, 4, 5]  # type: ignore[arg-type]
