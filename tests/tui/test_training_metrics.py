"""The training screen names each metric's latest value by the step that produced it, also when the first steps
did not report the metric (the policy's loss during critic warm-up)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from reef_tui.screens.training import facts_table, metric_series


def step(n: int, **metrics: float) -> dict[str, Any]:
    return {"step": n, "version": f"v{n}", "operation": "training", "result": "selected", "metrics": metrics}


def test_a_metric_missing_from_the_first_steps_is_named_by_its_own_steps() -> None:
    releases = [step(5, loss=0.2, critic_loss=0.1), step(4, loss=0.4, critic_loss=0.2), step(3, critic_loss=0.3),
                step(2, critic_loss=0.5), {**step(1), "operation": "creation"}]  # fmt: skip
    assert metric_series(releases, "loss") == [(4, 0.4), (5, 0.2)]  # type: ignore[arg-type]
    assert [n for n, _value in metric_series(releases, "critic_loss")] == [2, 3, 4, 5]  # type: ignore[arg-type]


def test_the_training_facts_show_each_sources_agreement_with_people_and_whether_it_counts() -> None:
    reason = "its agreement with people's scores is κ -1.00 on 20 shared records, below reports.min-agreement 0.2"
    status = {
        "training": {"scenarios": {}},
        "runtime": {},
        "sources": {
            "demo": {
                "judge": {"shared": 20, "kappa": -1.0, "counts": False, "reason": reason},
                "outcome": {"shared": 3, "kappa": None, "counts": True, "reason": None},
            },
            "other": {"next-turn": {"shared": 9, "kappa": 0.5, "counts": True, "reason": None}},
        },
    }
    console = Console(width=200, record=True)
    console.print(facts_table(status, "demo"))  # type: ignore[arg-type]
    shown = console.export_text()
    assert f"source judge    κ -1.00 on 20 shared records, counts no: {reason}" in shown
    assert "source outcome  κ - on 3 shared records, counts yes" in shown
    assert "next-turn" not in shown  # another scenario's
