"""`reef score --from FILE|-`: score from JSON lines, as a CI pipeline does. Every line is checked first, the
valid ones are sent, each refused line is reported with its number and reason; exit 0 when all were accepted,
1 when any was refused."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import typer

from reef_cli.output import print_json, say_error
from reef_cli.score_lines import LineRefused, ScoreLine, parse_line
from reef_client import ApiError, ReefClient


@dataclass(frozen=True)
class LineResult:
    """What became of one line: accepted (the report's id and scenario) or refused (why)."""

    number: int
    report_id: str | None = None
    scenario: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The result object `--json` prints for the line."""
        if self.error is not None:
            return {"line": self.number, "ok": False, "error": self.error}
        return {"line": self.number, "ok": True, "id": self.report_id, "scenario": self.scenario}


def score_from_lines(client: ReefClient, lines: Iterable[str], *, json: bool) -> int:
    """Check, send and report every line; returns the exit status (0 all accepted, 1 some refused)."""
    results: list[LineResult] = []
    valid: list[ScoreLine] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            valid.append(parse_line(number, text))
        except LineRefused as exc:
            results.append(LineResult(number, error=str(exc)))
    scenarios: dict[str, str] = {}
    for line in valid:
        results.append(_send(client, line, scenarios))
    results.sort(key=lambda result: result.number)
    refused = [result for result in results if result.error is not None]
    for result in results:
        if json:
            print_json(result.to_json())
        elif result.error is not None:
            say_error(f"line {result.number}: {result.error}")
    accepted = len(results) - len(refused)
    if not json:
        typer.echo(f"{accepted} line{'s' if accepted != 1 else ''} accepted, {len(refused)} refused", err=True)
    return 1 if refused else 0


def _send(client: ReefClient, line: ScoreLine, scenarios: dict[str, str]) -> LineResult:
    try:
        scenario = _scenario_of(client, line.references, scenarios)
        ack = client.report(
            scenario, line.references, score=line.score, feedback=line.feedback, metadata=line.metadata,
            agent_record_id=line.id,
        )  # fmt: skip
    except LineRefused as exc:
        return LineResult(line.number, error=str(exc))
    except ApiError as exc:
        return LineResult(line.number, error=f"{exc.message} ({exc.type})")
    return LineResult(line.number, ack["agent_record_id"], ack["scenario"])


def _scenario_of(client: ReefClient, references: list[str], known: dict[str, str]) -> str:
    """The one scenario all the receipts belong to, looked up once per receipt."""
    for receipt in references:
        if receipt not in known:
            try:
                known[receipt] = str(client.record(receipt)["scenario"])
            except ApiError as exc:
                if exc.status == 404:
                    raise LineRefused(f"receipt {receipt} is not a stored record") from None
                raise
    found = sorted({known[receipt] for receipt in references})
    if len(found) > 1:
        raise LineRefused(f"the receipts belong to different scenarios ({', '.join(found)}); one line per scenario")
    return found[0]
