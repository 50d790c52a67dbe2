"""SAO's critic diagnostics as one line, for `reef status` and the TUI's training screen."""

from __future__ import annotations

from reef_client.render.formats import MISSING
from reef_contract import CriticStatus


def critic_line(critic: CriticStatus) -> str:
    """SAO's critic in one line: its values, how much of the rewards they explain, and whether failed answers are
    pushed up (a critic that is not learning shows explained variance near 0 or below, and a high share)."""

    def number(value: float | None, spec: str) -> str:
        return MISSING if value is None else format(value, spec)

    low, high = critic["value_min"], critic["value_max"]
    values = MISSING if low is None or high is None else f"{low:+.2f}..{high:+.2f}"
    share = critic["failed_positive_share"]
    parts = [
        f"values {values}",
        f"explained variance {number(critic['explained_variance'], '.2f')}",
        f"failed answers pushed up {MISSING if share is None else f'{share:.0%}'}",
        f"over the last {critic['window']} samples",
    ]
    if critic["warmup_steps_left"]:
        parts.append(f"{critic['warmup_steps_left']} warm-up steps left")
    return ", ".join(parts)
