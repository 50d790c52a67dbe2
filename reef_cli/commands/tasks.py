"""`reef tasks`: a scenario's evaluation tasks (add, list, remove) and its replays of low-scored conversations
(promote one to a protected task, or dismiss it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, error_console, fail, print_answer, print_json
from reef_cli.render.tasks import check_of, kind_of, tasks_table
from reef_cli.task_fixture import FixtureError, read_fixture
from reef_contract import EvalTask

ADD_EXAMPLE = "Example: reef tasks add --scenario my-harness 'Add a --verbose flag' --regex verbose --protected"
LIST_EXAMPLE = "Example: reef tasks list --scenario my-harness --json"
REMOVE_EXAMPLE = "Example: reef tasks remove --scenario my-harness t-3f2a9c0d1e2b4a5f"
PROMOTE_EXAMPLE = "Example: reef tasks promote --scenario my-harness r-0190c3…"
DISMISS_EXAMPLE = "Example: reef tasks dismiss --scenario my-harness r-0190c3…"

app = typer.Typer(
    name="tasks",
    help="A scenario's evaluation tasks, and replays of its low-scored conversations: add, list, remove, promote, "
    "dismiss.",
    epilog=LIST_EXAMPLE,
    no_args_is_help=True,
)

ScenarioOption = Annotated[
    str, typer.Option("--scenario", "-s", help="The scenario the tasks belong to.", show_default=False)
]
TaskArgument = Annotated[str, typer.Argument(help="A task's id (t-…).", show_default=False)]
ReplayArgument = Annotated[str, typer.Argument(help="A replay's id (r-…), as `reef tasks list` shows it.")]


@app.command("add", epilog=ADD_EXAMPLE)
def add(
    prompt: Annotated[str, typer.Argument(help="What the agent is asked.", show_default=False)],
    scenario: ScenarioOption,
    regex: Annotated[
        str | None, typer.Option("--regex", help="A Python regular expression the final answer must match.")
    ] = None,
    judge: Annotated[
        str | None, typer.Option("--judge", help="An instruction to the judge, in place of a regex.")
    ] = None,
    fixture: Annotated[
        Path | None,
        typer.Option("--fixture", help="A folder whose files are the task's workspace.", file_okay=False),
    ] = None,
    protected: Annotated[
        bool, typer.Option("--protected", help="Guard against regressions: a candidate worse here is rejected.")
    ] = False,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Add an evaluation task: a prompt, an optional workspace and at most one check (--regex or --judge)."""
    try:
        files = read_fixture(fixture) if fixture is not None else {}
    except FixtureError as exc:
        fail(f"--fixture: {exc}", 2)
    with daemon_client(url, token, scenario) as client:
        task = client.add_task(scenario, prompt, fixture=files, regex=regex, judge=judge, protected=protected)
    print_answer(task, json, f"added {kind_of(task)} {task['id']} to {scenario}{_described(task)}")


@app.command("list", epilog=LIST_EXAMPLE)
def list_tasks(
    scenario: ScenarioOption, json: JsonOption = False, url: UrlOption = None, token: TokenOption = None
) -> None:
    """List a scenario's tasks, then the replays of its recent low-scored conversations (harness.replays of them)."""
    with daemon_client(url, token, scenario) as client:
        listed = client.tasks(scenario)
    if json:
        print_json(listed)
    elif listed["tasks"] or listed["replays"]:
        console().print(tasks_table(listed))
    else:
        error_console().print(
            f"{scenario} has no tasks and no low-scored conversations to replay; add one with `reef tasks add`"
        )


@app.command("remove", epilog=REMOVE_EXAMPLE)
def remove(
    task_id: TaskArgument, scenario: ScenarioOption, json: JsonOption = False, url: UrlOption = None,
    token: TokenOption = None,
) -> None:  # fmt: skip
    """Remove a stored task. (A replay is dismissed instead: `reef tasks dismiss`.)"""
    with daemon_client(url, token, scenario) as client:
        task = client.remove_task(scenario, task_id)
    print_answer(task, json, f"removed {kind_of(task)} {task['id']} from {scenario}")


@app.command("promote", epilog=PROMOTE_EXAMPLE)
def promote(
    replay_id: ReplayArgument, scenario: ScenarioOption, json: JsonOption = False, url: UrlOption = None,
    token: TokenOption = None,
) -> None:  # fmt: skip
    """Make a replay a protected task: from then on a candidate must not do worse on it."""
    with daemon_client(url, token, scenario) as client:
        task = client.promote_replay(scenario, replay_id)
    print_answer(task, json, f"promoted {replay_id} to protected task {task['id']}")


@app.command("dismiss", epilog=DISMISS_EXAMPLE)
def dismiss(
    replay_id: ReplayArgument, scenario: ScenarioOption, json: JsonOption = False, url: UrlOption = None,
    token: TokenOption = None,
) -> None:  # fmt: skip
    """Stop offering a replay, and other conversations that opened with the same words."""
    with daemon_client(url, token, scenario) as client:
        ack = client.dismiss_replay(scenario, replay_id)
    print_answer(ack, json, f"dismissed {replay_id}; it is no longer replayed")


def _described(task: EvalTask) -> str:
    check = check_of(task)
    files = len(task["fixture"])
    parts = ([f"check {check}"] if task["regex"] or task["judge"] else []) + ([f"{files} files"] if files else [])
    return f" ({', '.join(parts)})" if parts else ""
