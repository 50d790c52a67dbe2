"""`reef import` brings agent sessions in as records; `reef export` writes a scenario's records as a dataset."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, TextIO

import typer
from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from reef_cli.connect import daemon_client
from reef_cli.importing import import_files, import_size
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import error_console, fail, print_json, say_error
from reef_client import nothing_to_export, unwritable, whole_file
from reef_contract import ImportResult
from reef_transcripts.sessions import FORMATS, BadLine, Conversation

IMPORT_EXAMPLE = "Example: reef import ~/.codex/sessions ~/.pi/agent/sessions --scenario coding"
EXPORT_EXAMPLE = "Example: reef export --scenario coding --min-score 0.5 --format openai -o train.jsonl"

# The formats reef_transcripts reads, as the choices of `--format`.
ImportFormat = StrEnum("ImportFormat", {name.replace("-", "_"): name for name in FORMATS})  # type: ignore[misc]


class ExportFormat(StrEnum):
    """What `reef export --format` writes."""

    openai = "openai"
    preference = "preference"
    tokens = "tokens"


def _one_of(choices: type[StrEnum]) -> str:
    """The choices as help text says them ("openai, preference or tokens"): in the help, not as the option's
    metavar, so that a narrow terminal wraps them between words instead of cutting one."""
    names = [str(choice.value) for choice in choices]
    return f"{', '.join(names[:-1])} or {names[-1]}"


SINCE_HELP = "Only records made since: a date, an ISO 8601 time or epoch seconds."
ScenarioOption = Annotated[str, typer.Option("--scenario", "-s", help="The scenario.", show_default=False)]


def import_(
    paths: Annotated[
        list[Path], typer.Argument(help="Session files, or folders searched for *.jsonl.", show_default=False)
    ],
    scenario: ScenarioOption,
    format: Annotated[
        ImportFormat | None,
        typer.Option(
            "--format",
            metavar="<format>",
            help=f"The files' format: {_one_of(ImportFormat)}; told from each file's first line if not given.",
        ),
    ] = None,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Import agent sessions as records.

    OpenAI chat JSONL (one conversation per line, with optional score and feedback), Claude Code transcripts,
    codex rollouts and pi sessions (one conversation per file). Each becomes a record tagged `imported`, scorable
    like any other; a score in the file becomes a report. Importing the same conversation again adds nothing. A bad
    line is reported with its file and line; the rest is kept. Exit 1 when anything was refused. --json prints a
    line per conversation (file, line, status, and the receipt or the error), then the counts.
    """

    def refused(bad: BadLine) -> None:
        if json:
            print_json({"file": bad.file, "line": bad.line, "error": bad.reason})
        else:
            progress.console.print(f"reef: {bad.where()}: {bad.reason}", markup=False, highlight=False, soft_wrap=True)

    def stored(source: Conversation, result: ImportResult) -> None:
        if json:
            print_json({"file": source.file, "line": source.line, "status": result["status"], "id": result["id"]})

    name = None if format is None else str(format.value)
    with daemon_client(url, token) as client, _progress(DownloadColumn()) as progress:
        task = progress.add_task("importing", total=import_size(paths))
        summary = import_files(
            client, scenario, paths, name, on_refused=refused, on_stored=stored,
            advance=lambda n: progress.advance(task, n),
        )  # fmt: skip
    if json:
        print_json(summary.to_json())
    else:
        typer.echo(summary.sentence(), err=True)
    if summary.refused:
        raise typer.Exit(1)


def export(
    scenario: ScenarioOption,
    format: Annotated[
        ExportFormat, typer.Option("--format", metavar="<format>", help=f"What to write: {_one_of(ExportFormat)}.")
    ] = ExportFormat.openai,
    min_score: Annotated[
        float | None, typer.Option("--min-score", help="Only records scored at least this.", show_default=False)
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="Only records made since: a date, an ISO 8601 time or epoch seconds.", show_default=False
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="The file to write; stdout if not given.", show_default=False)
    ] = None,
    include_cut: Annotated[
        bool,
        typer.Option("--include-cut", help='Also answers cut before their end, marked "complete": false.'),
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Export a scenario's records as JSON lines.

    openai: chat fine-tuning lines (messages with tool calls, tools, score). preference: chosen/rejected pairs of
    records with the same prompt and different scores (the format DPO trainers read). tokens: prompt and output
    token ids, log-probs, weight versions and reward, for records the embedded model generated. Only answers that
    arrived whole, unless --include-cut. The file loads with datasets.load_dataset("json", data_files=FILE). An
    export that fails part way exits 1 and leaves no file.
    """
    if output is not None:
        problem = unwritable(output.expanduser().absolute())
        if problem:
            fail(f"cannot export there: {problem}", 2)
    written = 0
    with daemon_client(url, token, scenario) as client, client.export(
        scenario, format=format.value, min_score=min_score, since=since, include_cut=include_cut
    ) as stream, _sink(output) as sink, _progress(MofNCompleteColumn()) as progress:  # fmt: skip
        task = progress.add_task("exporting", total=stream.total or None)
        for line in stream.lines:
            sink.write(line + "\n")
            written += 1
            progress.advance(task)
    where = f" to {output}" if output is not None else ""
    if written == 0:
        say_error(f"{nothing_to_export(scenario, format.value)}; wrote nothing{where}")
    else:
        typer.echo(f"exported {written} line{'s' if written != 1 else ''}{where}", err=True)


@contextmanager
def _sink(output: Path | None) -> Iterator[TextIO]:
    """stdout, or a file renamed onto `output` only once the export is whole."""
    if output is None:
        yield sys.stdout
        return
    with whole_file(output) as sink:
        yield sink


def _progress(counter: BarColumn | DownloadColumn | MofNCompleteColumn) -> Progress:
    """A progress bar on stderr, shown only on a terminal."""
    console = error_console()
    columns = (TextColumn("{task.description}"), BarColumn(), counter, TimeRemainingColumn())
    return Progress(*columns, console=console, transient=True, disable=not console.is_terminal)
