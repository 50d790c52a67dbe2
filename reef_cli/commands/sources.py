"""`reef sources`: each derived source's agreement with people's scores, per scenario, and turning one back on
after its agreement switched it off there."""

from __future__ import annotations

from typing import Annotated

import typer

from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, print_json
from reef_client.render.source_trust import agreement_text, sources_table

LIST_EXAMPLE = "Example: reef sources --json"
ENABLE_EXAMPLE = "Example: reef sources enable judge --scenario demo"

app = typer.Typer(
    name="sources",
    help="How each derived source agrees with people's scores, per scenario; turn one back on.",
    epilog=LIST_EXAMPLE,
    invoke_without_command=True,
    no_args_is_help=False,
)


@app.callback()
def list_sources(
    ctx: typer.Context, json: JsonOption = False, url: UrlOption = None, token: TokenOption = None
) -> None:
    """How each derived source agrees with people's scores, per scenario, and whether it counts."""
    if ctx.invoked_subcommand is not None:
        return
    with daemon_client(url, token) as client:
        agreements = client.status()["sources"]
    if json:
        print_json(agreements)
        return
    table = sources_table(agreements)
    console().print(table if table is not None else "no derived source shares a record with people's scores yet")


@app.command("enable", epilog=ENABLE_EXAMPLE)
def enable(
    source: Annotated[str, typer.Argument(help="The derived source: next-turn, judge, outcome, import ...")],
    scenario: Annotated[str, typer.Option("--scenario", "-s", help="The scenario.", show_default=False)],
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Count a source's scores in a scenario again (training, live scores, canaries, the gate's tasks) after its
    agreement with people's scores switched it off there; it is never switched off again by itself there."""
    with daemon_client(url, token) as client:
        enabled = client.enable_source(scenario, source)
    if json:
        print_json(enabled)
        return
    console().print(f"{source} counts again in {scenario} ({agreement_text(enabled['agreement'])})")
