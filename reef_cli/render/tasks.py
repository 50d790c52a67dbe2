"""A scenario's evaluation tasks and replays as one table, for `reef tasks list`."""

from __future__ import annotations

from rich.table import Table

from reef_client.render.formats import MISSING, clock
from reef_contract import EvalTask, TaskList

PROMPT_WIDTH = 70
CHECK_WIDTH = 30


def tasks_table(listed: TaskList) -> Table:
    """Stored tasks first (oldest first), then the replays offered now (newest conversation first)."""
    table = Table(title=f"evaluation tasks of {listed['scenario']}")
    for column in ("id", "kind", "check", "files", "created"):
        table.add_column(column, no_wrap=True)
    table.add_column("prompt")  # the one column that wraps on a narrow terminal
    for task in [*listed["tasks"], *listed["replays"]]:
        table.add_row(
            task["id"], kind_of(task), check_of(task), str(len(task["fixture"]) or MISSING), clock(task["created_at"]),
            _cut(" ".join(task["prompt"].split()), PROMPT_WIDTH),
        )  # fmt: skip
    return table


def kind_of(task: EvalTask) -> str:
    """task, protected task, or replay (with the record it replays)."""
    if task["kind"] == "replay":
        return "replay"
    return "protected task" if task["protected"] else "task"


def check_of(task: EvalTask) -> str:
    """The task's check: `regex /…/`, `judge: …`, or MISSING."""
    if task["regex"] is not None:
        return _cut(f"regex /{task['regex']}/", CHECK_WIDTH)
    if task["judge"] is not None:
        return _cut(f"judge: {task['judge']}", CHECK_WIDTH)
    return MISSING


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
