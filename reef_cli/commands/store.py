"""`reef store copy`: move a deployment's store between SQLite and PostgreSQL (either way), resumably.

It works on the databases themselves, not through a daemon: a PostgreSQL destination's daemons may keep recording
meanwhile; a SQLite destination's daemon is stopped first (the copy refuses otherwise)."""

from __future__ import annotations

import dataclasses
import time
from typing import Annotated

import typer

from reef_cli.options import JsonOption
from reef_cli.output import console, error_console, fail, print_json

COPY_EXAMPLE = (
    "Example: reef store copy --from sqlite:~/.reef/reef.sqlite3 --to postgresql://reef:secret@db.internal/reef"
)

app = typer.Typer(
    name="store",
    help="The store's database: copy a deployment's records, reports, steps and events between engines.",
    epilog=COPY_EXAMPLE,
    no_args_is_help=True,
)


@app.command("copy", epilog=COPY_EXAMPLE)
def copy(
    source: Annotated[str, typer.Option("--from", help="The store to read: sqlite:PATH or postgresql://…")],
    destination: Annotated[str, typer.Option("--to", help="The store to fill: sqlite:PATH or postgresql://…")],
    json: JsonOption = False,
) -> None:
    """Copy every table, into an empty store or one in use (its daemons may record meanwhile): records and events
    take the destination's next free numbers, rows already there are kept, so running it again resumes (or adds
    nothing). At the end every source row is looked up at the destination."""
    from reef_daemon.store.engines.copy import CopyFailed, copy_store

    started = time.monotonic()
    said: dict[str, float] = {}

    def progress(table: str, done: int, total: int) -> None:
        now = time.monotonic()
        if json or (done < total and now - said.get(table, 0.0) < 1.0):
            return
        said[table] = now
        error_console().print(f"{table}: {done}/{total}")

    try:
        outcomes = copy_store(source, destination, progress)
    except CopyFailed as exc:
        fail(f"reef store copy: {exc}", 1)
    except Exception as exc:  # the database's own words (cannot connect, newer schema …)
        fail(f"reef store copy: {exc}", 1)
    seconds = time.monotonic() - started
    if json:
        print_json(
            {
                "tables": [dataclasses.asdict(o) for o in outcomes],
                "seconds": round(seconds, 3),
            }
        )
        return
    copied = sum(o.copied for o in outcomes)
    for o in outcomes:
        console().print(f"{o.table}: {o.copied} copied, {o.present} of the source's {o.source} at the destination")
    console().print(f"copied {copied} rows in {seconds:.1f} s; every source row found at the destination")
