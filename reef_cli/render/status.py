"""`reef status` and `reef scenarios` as tables."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table

from reef_client import ScenarioRow, Status
from reef_client.render.critic import critic_line
from reef_client.render.formats import MISSING, duration
from reef_client.render.source_trust import sources_table
from reef_client.render.spend import spend_text, telemetry_text
from reef_contract import (
    JUDGE_SCENARIO,
    NextTurnStatus,
    SamplingDefaults,
    SpendAnswer,
    StoreStatus,
    Training,
)
from reef_daemon.scenario_recipes import other_recipe_notice


def status_view(status: Status, url: str, costs: SpendAnswer | None = None) -> RenderableType:
    """The daemon's state: version, recipe, runtime, uptime, training (and what it refused, by reason), errors,
    then one row per scenario."""
    recipe = status.get("recipe") or {}
    runtime = status.get("runtime") or {}
    training = status.get("training") or {}
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("daemon", f"{url} (reef {status.get('version', MISSING)})")
    facts.add_row("uptime", duration(status.get("uptime_s")))
    facts.add_row("recipe", str(recipe.get("name", MISSING)))
    engine = f" ({runtime['engine']} engine)" if runtime.get("engine") else ""
    where = f" at {runtime['url']}" if runtime.get("url") else ""
    facts.add_row("runtime", str(runtime.get("kind", MISSING)) + engine + where)
    facts.add_row("model", str(runtime.get("model") or "(chosen by each client)"))
    if runtime.get("weight_version") is not None:
        facts.add_row("weights", str(runtime["weight_version"]))
    if runtime.get("decoding"):
        facts.add_row("decoding", str(runtime["decoding"]))
    if runtime.get("sampling"):
        facts.add_row("sampling", _sampling(runtime["sampling"], recipe.get("sampling")))
        facts.add_row("answers", _answer_bounds(runtime["sampling"]))
    facts.add_row("training", _training(training))
    for name, reasons in _refused(training):
        facts.add_row("not trained", f"{name}: {reasons}")
    if recipe.get("outcomes"):
        facts.add_row("outcomes", str(recipe["outcomes"]))
    if recipe.get("critic"):
        facts.add_row("critic", critic_line(recipe["critic"]))
    recipes = {name: counts["recipe"] for name, counts in (status.get("scenarios") or {}).items()}
    for line in other_recipe_notice(str(recipe.get("name", "")), recipes):
        facts.add_row("note", f"[yellow]{line}[/yellow]")
    if recipe.get("trial"):
        facts.add_row("trials", str(recipe["trial"]))
    if recipe.get("proposer"):
        facts.add_row("proposer", str(recipe["proposer"]))
    facts.add_row("auth", "on" if status.get("auth") else "off")
    if runtime.get("kind") == "http":
        facts.add_row("upstream login", _upstream_login(status))
    if status.get("store"):
        facts.add_row("store", _store(status["store"]))
    if judged := status.get("next_turn"):
        facts.add_row("signals", _signals(judged))
        if judged["turns"]:
            facts.add_row("next turn", _next_turn(judged))
    spend = costs["scenarios"] if costs is not None else {}
    if costs is not None and JUDGE_SCENARIO in spend:
        by_source = ", ".join(f"{name} {spend_text(part)}" for name, part in sorted(costs["judge"].items()))
        facts.add_row("judge calls", f"{spend_text(spend[JUDGE_SCENARIO])} ({by_source})")
    if telemetry := status.get("telemetry"):
        facts.add_row("telemetry", telemetry_text(telemetry))
    for error in status.get("errors") or []:
        facts.add_row("error", f"[red]{error}[/red]")

    per_scenario = training.get("scenarios") or {}
    scenarios = Table(title="scenarios", title_justify="left", expand=False)
    for column in ("scenario", "recipe", "mode", "records", "reports", "unscored", "steps", "spend"):
        scenarios.add_column(column, justify="left" if column in ("scenario", "recipe", "mode") else "right")
    scenarios.columns[0].overflow = "fold"  # a long name (one a user types after --scenario) folds, never cut
    for name, counts in sorted((status.get("scenarios") or {}).items()):
        state = per_scenario.get(name)
        steps = None if state is None else state.get("steps")
        scenarios.add_row(
            name, str(counts.get("recipe", MISSING)), str(counts.get("training_mode", MISSING)),
            str(counts.get("records", 0)), str(counts.get("reports", 0)), str(counts.get("unscored", 0)),
            MISSING if steps is None else str(steps), spend_text(spend.get(name)),
        )  # fmt: skip
    if not status.get("scenarios"):
        return Group(facts, "", "no scenarios yet: send a request with the x-reef-scenario header")
    trusted = sources_table(status.get("sources") or {})
    return Group(facts, "", scenarios) if trusted is None else Group(facts, "", scenarios, "", trusted)


def _upstream_login(status: Status) -> str:
    """Whose credential model calls carry upstream (inference.client-auth, inference.upstream-api-key)."""
    own = "reef's upstream key" if status.get("upstream_key") else "no key of reef's"
    if status.get("client_auth") == "pass":
        return f"the client's own (client-auth pass; reef's token in x-reef-token); without one, {own}"
    return f"{own} (client-auth reef: a client's own credential is not forwarded)"


def _sampling(defaults: SamplingDefaults, recipe_note: str | None) -> str:
    """The embedded runtime's defaults for requests that set no sampling, and what the recipe says of them."""
    temperature, top_p, max_tokens = defaults["temperature"], defaults["top_p"], defaults["max_tokens"]
    line = f"temperature {temperature:g}, top-p {top_p:g}, at most {max_tokens} tokens when a request sets none"
    return f"{line} ({recipe_note})" if recipe_note else line


def _answer_bounds(defaults: SamplingDefaults) -> str:
    """The embedded runtime's bounds on every answer, whatever its request asks."""
    cap = (
        f"at most {defaults['max_answer_tokens']} tokens and {defaults['max_answer_s']:g} s whatever a request asks "
        "(inference.max-answer-tokens, .max-answer-s)"
    )
    repeats = defaults["repeat_stop_tokens"]
    if not repeats:
        return f"{cap}; a looping answer runs on (inference.repeat-stop-tokens 0)"
    return f"{cap}; cut once its last {repeats} tokens repeat one span (inference.repeat-stop-tokens)"


def _refused(training: Training) -> list[tuple[str, str]]:
    """Per scenario, the records its recipe will never train on, counted by reason, most first."""
    refused = []
    for name, state in sorted((training.get("scenarios") or {}).items()):
        counted = sorted((state.get("ineligible") or {}).items(), key=lambda item: (-item[1], item[0]))
        if counted:
            refused.append((name, "; ".join(f"{reason} ({count})" for reason, count in counted)))
    return refused


def _training(training: Training) -> str:
    """On or off, and the newest step of any scenario (each scenario keeps its own step numbers)."""
    if not training.get("enabled"):
        return "off (this recipe records only)"
    steps = [
        (last["created_at"] or 0.0, last["step"], name)
        for name, state in (training.get("scenarios") or {}).items()
        if (last := state.get("last_step")) is not None
    ]
    if not steps:
        return "on, no step yet"
    _at, step, name = max(steps)
    return f"on, last step {step} ({name})"


def scenarios_table(rows: list[ScenarioRow]) -> Table:
    """One row per active scenario with its counts."""
    table = Table()
    for column in ("scenario", "recipe", "mode", "records", "reports", "unscored", "release"):
        table.add_column(column, justify="right" if column in ("records", "reports", "unscored") else "left")
    table.columns[0].overflow = "fold"  # a long name (one a user types after --scenario) folds, never cut
    table.columns[-1].no_wrap = True  # and a release is shown whole
    for row in rows:
        table.add_row(
            row["scenario"], row["recipe"], row["training_mode"], str(row.get("records", 0)),
            str(row.get("reports", 0)), str(row.get("unscored", 0)), str(row.get("current_release") or MISSING),
        )  # fmt: skip
    return table


def _store(store: StoreStatus) -> str:
    """Where the records are, and their use of the retention budget when one is set."""
    line = f"{store.get('engine', 'sqlite')} {store.get('path', MISSING)}"
    budget = []
    if store.get("max_bytes") is not None:
        used = store.get("body_bytes")
        budget.append(f"{_mib(used) if used is not None else MISSING} of {_mib(store['max_bytes'])} of bodies")
    if store.get("max_age_s") is not None:
        budget.append(f"bodies kept {duration(store['max_age_s'])}")
    if budget:
        line += f" ({', '.join(budget)}; {store.get('trimmed') or 0} trimmed)"
    return line


def _mib(size: int | None) -> str:
    return MISSING if size is None else f"{size / 1024 / 1024:.1f} MiB"


def _signals(counts: NextTurnStatus) -> str:
    """The reports each signal from a session's next request made since the daemon started, and the answers its
    matching let go or could not find."""
    made = counts.get("reports") or {}
    line = ", ".join(f"{source} {number}" for source, number in sorted(made.items())) or "no reports yet"
    missed = [
        f"{number} {what}"
        for number, what in (
            (counts["forgotten"], "answers let go for reports.next-turn-memory"),
            (counts["unmatched"], "next turns that matched no kept answer"),
        )
        if number
    ]
    return f"{line}{'; ' if missed else ''}{', '.join(missed)}"


def _next_turn(counts: NextTurnStatus) -> str:
    """What the next-turn judge did since the daemon started, and what it cost."""
    line = f"judged {counts['judged']} of {counts['turns']} answered turns"
    passed = [
        f"{number} {what}"
        for number, what in (
            (counts["neutral"], "neutral (no report)"),
            (counts["no_judgment"], "without a verdict"),
            (counts["over_bounds"], "passed over for its bounds"),
            (counts["scores_ignored"], "judge scores ignored for disagreeing with their verdict"),
        )
        if number
    ]
    tokens = counts["input_tokens"] + counts["output_tokens"]
    failure = counts.get("last_failure")
    last = f"; the last without a verdict: {failure}" if counts["no_judgment"] and failure else ""
    return f"{line}{'; ' if passed else ''}{', '.join(passed)} ({tokens:,} tokens){last}"
