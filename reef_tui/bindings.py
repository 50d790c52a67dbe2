"""Bindings several screens share: help first (so the footer shows it even at 80 columns) and the score keys."""

from __future__ import annotations

from textual.binding import Binding

from reef_tui.scoring import KEY_SCORES

HELP = Binding("question_mark", "app.help", "Help", key_display="?")


def score_bindings() -> list[Binding]:
    """One binding per scoring key (the footer shows them once, as `1-5 Score`)."""
    shown = Binding("1", "score('1')", "Score", key_display="1-5")
    return [shown, *(Binding(key, f"score('{key}')", show=False) for key in KEY_SCORES if key != "1")]
