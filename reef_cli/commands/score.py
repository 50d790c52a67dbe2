"""`reef score`: score receipts given as arguments, from JSON lines (`--from`), or one by one (`--next`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from reef_cli.commands.score_from import score_from_lines
from reef_cli.commands.score_next import score_next
from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import fail, print_json
from reef_client import ReefClient

EXAMPLE = (
    "Examples: reef score 3f2a9c0d4e5b6a7980c1d2e3f4a5b6c7 1 --feedback 'right answer' (1 is the best score)  |  "
    "ci-checks | reef score --from -  |  reef score --next --scenario demo"
)
USAGE = "give RECEIPT... SCORE, or --from FILE (- for stdin), or --next"


def score(
    values: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RECEIPT... SCORE",
            help="Receipts, then the score: from 0 (worst) to 1 (best) unless the daemon's reports.score-min/max "
            "say otherwise.",
            show_default=False,
        ),
    ] = None,
    feedback: Annotated[str | None, typer.Option("--feedback", "-m", help="What was right or wrong.")] = None,
    from_file: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="FILE|-",
            help="JSON lines of {receipt|references, score, feedback, metadata, id}.",
        ),
    ] = None,
    next_: Annotated[bool, typer.Option("--next", help="Walk unscored records one by one and ask.")] = False,
    scenario: Annotated[str | None, typer.Option("--scenario", "-s", help="With --next: only this scenario.")] = None,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Score records: by receipt, from JSON lines, or one by one.

    The scenario is taken from the records. With --from, every line is checked, the valid ones are sent and
    each refused line is named with its number and reason; exit 0 when all were accepted, 1 when any was
    refused, 2 on bad usage. Lines are idempotent by `id` (derived from the line when absent), so rerunning a
    pipeline stores nothing twice.
    """
    values = values or []
    if sum((bool(values), from_file is not None, next_)) != 1:
        fail(USAGE, 2)
    if from_file is not None:
        if feedback is not None or scenario is not None:
            fail("--from takes everything from the lines; drop --feedback and --scenario", 2)
        lines = _open_lines(from_file)
        with daemon_client(url, token) as client:
            status = score_from_lines(client, lines, json=json)
        raise typer.Exit(status)
    if next_:
        if feedback is not None or json:
            fail("--next asks for each score and feedback; drop --feedback and --json", 2)
        with daemon_client(url, token, scenario) as client:
            score_next(client, scenario)
        return
    receipts, value = _receipts_and_score(values)
    with daemon_client(url, token) as client:
        _score_receipts(client, receipts, value, feedback, json=json)


def _receipts_and_score(values: list[str]) -> tuple[list[str], float]:
    unknown = [value for value in values if value.startswith("--")]
    if unknown:
        fail(f"no such option {unknown[0]}; see reef score --help", 2)
    if len(values) < 2:
        fail(f"{USAGE} (a score needs at least one receipt before it)", 2)
    try:
        value = float(values[-1])
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        fail(f"the score must be a number, and '{values[-1]}' is not; the score comes last", 2)
    return [receipt.strip() for receipt in values[:-1]], value


def _score_receipts(client: ReefClient, receipts: list[str], value: float, feedback: str | None, *, json: bool) -> None:
    records = {receipt: client.record(receipt) for receipt in dict.fromkeys(receipts)}
    scenarios = sorted({str(record["scenario"]) for record in records.values()})
    if len(scenarios) > 1:
        fail(f"these receipts belong to different scenarios ({', '.join(scenarios)}); score each scenario apart")
    ack = client.report(scenarios[0], list(records), score=value, feedback=feedback)
    if json:
        print_json(ack)
        return
    count = len(records)
    said = f"{count} record{'s' if count != 1 else ''}"
    typer.echo(f"scored {said} in {ack['scenario']}: {value:g} (report {ack['agent_record_id']})")
    for receipt, record in records.items():
        earlier = record.get("score")
        if earlier is not None and ack["created"]:
            typer.echo(f"{receipt} had a score of {earlier:g}; this one replaces it (reef show {receipt} lists both)")


def _open_lines(source: str) -> list[str]:
    if source == "-":
        return typer.get_text_stream("stdin").read().splitlines()
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}", 2)
