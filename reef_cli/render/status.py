"""`reef status` and `reef scenarios` as tables."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table

from reef_cli.client import ScenarioRow
from reef_cli.render.formats import MISSING, duration


def status_view(status: dict[str, Any], url: str) -> RenderableType:
    """The daemon's state: version, recipe, runtime, uptime, training, errors, then one row per scenario."""
    recipe = status.get("recipe") or {}
    runtime = status.get("runtime") or {}
    training = status.get("training") or {}
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("daemon", f"{url} (reef {status.get('version', MISSING)})")
    facts.add_row("uptime", duration(status.get("uptime_s")))
    facts.add_row("recipe", str(recipe.get("name", MISSING)))
    facts.add_row(
        "runtime", str(runtime.get("kind", MISSING)) + (f" at {runtime['url']}" if runtime.get("url") else "")
    )
    facts.add_row("model", str(runtime.get("model") or "(chosen by each client)"))
    if runtime.get("weight_version") is not None:
        facts.add_row("weights", str(runtime["weight_version"]))
    if runtime.get("sampling"):
        facts.add_row("sampling", _sampling(runtime["sampling"], recipe.get("sampling")))
    facts.add_row("training", _training(training))
    if recipe.get("trial"):
        facts.add_row("trials", str(recipe["trial"]))
    facts.add_row("auth", "on" if status.get("auth") else "off")
    for error in status.get("errors") or []:
        facts.add_row("error", f"[red]{error}[/red]")

    scenarios = Table(title="scenarios", title_justify="left", expand=False)
    for column in ("scenario", "recipe", "mode", "records", "reports", "unscored"):
        scenarios.add_column(column, justify="right" if column in ("records", "reports", "unscored") else "left")
    for name, counts in sorted((status.get("scenarios") or {}).items()):
        scenarios.add_row(
            name, str(counts.get("recipe", MISSING)), str(counts.get("training_mode", MISSING)),
            str(counts.get("records", 0)), str(counts.get("reports", 0)), str(counts.get("unscored", 0)),
        )  # fmt: skip
    if not status.get("scenarios"):
        return Group(facts, "", "no scenarios yet: send a request with the x-reef-scenario header")
    return Group(facts, "", scenarios)


def _sampling(defaults: dict[str, Any], recipe_note: Any) -> str:
    """The embedded runtime's defaults for requests that set no sampling, and what the recipe says of them."""
    values = [defaults.get(key) for key in ("temperature", "top_p", "max_tokens")]
    if not all(isinstance(value, int | float) for value in values):
        return MISSING
    temperature, top_p, max_tokens = values
    line = f"temperature {temperature:g}, top-p {top_p:g}, at most {max_tokens} tokens when a request sets none"
    return f"{line} ({recipe_note})" if recipe_note else line


def _training(training: dict[str, Any]) -> str:
    if not training.get("enabled"):
        return "off (this recipe records only)"
    last = training.get("last_step")
    return "on" + (f", last step {last}" if last else ", no step yet")


def scenarios_table(rows: list[ScenarioRow]) -> Table:
    """One row per active scenario with its counts."""
    table = Table()
    for column in ("scenario", "recipe", "mode", "records", "reports", "unscored", "release"):
        table.add_column(column, justify="right" if column in ("records", "reports", "unscored") else "left")
    for row in rows:
        table.add_row(
            row["scenario"], row["recipe"], row["training_mode"], str(row.get("records", 0)),
            str(row.get("reports", 0)), str(row.get("unscored", 0)), str(row.get("current_release") or MISSING),
        )  # fmt: skip
    return table
