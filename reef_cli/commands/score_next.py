"""`reef score --next`: walk unscored records oldest first; show each, ask for a score and optional feedback.
Enter skips a record, q quits."""

from __future__ import annotations

import math
from typing import Literal

import typer

from reef_cli.output import console
from reef_client import ReefClient
from reef_client.render.record import record_view
from reef_contract import ScoreScale

QUIT: Literal["quit"] = "quit"


def score_next(client: ReefClient, scenario: str | None) -> None:
    """Prompt for each unscored record in turn until none is left or the person quits."""
    cursor = 0
    scored = skipped = 0
    out = console()
    scale = client.status()["score_scale"]
    while True:
        page = client.records(scenario=scenario, unscored=True, after=cursor, limit=1)
        if not page["records"]:
            out.print(f"no more unscored records (scored {scored}, skipped {skipped})")
            return
        row = page["records"][0]
        cursor = row["sequence"]
        out.rule(f"unscored record in {row['scenario']}")
        out.print(record_view(client.record(row["id"]), how_to_score=None))  # the prompt below asks for it
        answer = _ask_score(scale)
        if answer == QUIT:
            out.print(f"stopped (scored {scored}, skipped {skipped})")
            return
        if answer is None:
            skipped += 1
            continue
        feedback = _ask("feedback (optional, Enter for none)")
        ack = client.report(row["scenario"], [row["id"]], score=answer, feedback=feedback or None)
        scored += 1
        out.print(f"scored {answer:g} (report {ack['agent_record_id']})")


def _ask_score(scale: ScoreScale) -> float | Literal["quit"] | None:
    """A score on the deployment's scale, None to skip, or QUIT."""
    low, high = scale["min"], scale["max"]
    while True:
        text = _ask(f"score from {low:g} (worst) to {high:g} (best); Enter skips, q quits")
        if text is None or text.lower() in ("q", "quit"):
            return QUIT
        if text == "":
            return None
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if low <= value <= high:
            return value
        if math.isfinite(value):
            typer.echo(f"{value:g} is outside the scale; type a score from {low:g} to {high:g}")
        else:
            typer.echo(f"'{text}' is not a number; type a score from {low:g} to {high:g}")


def _ask(question: str) -> str | None:
    """One line from the person, stripped; None at end of input."""
    try:
        return str(typer.prompt(question, default="", show_default=False)).strip()
    except typer.Abort:
        return None
