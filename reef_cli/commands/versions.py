"""`reef versions`, `reef promote`, `reef rollback`: a scenario's harness versions, and changing which one serves."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from reef_cli.commands.request import ScenarioOption
from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, error_console, fail, print_answer, print_json
from reef_client import ApiError, ReefClient, ReleaseRow, ShownRelease, VersionScores, mark_installed
from reef_client.render.evidence import EVIDENCE_HEADERS, evidence_cells, evidence_of, evidence_summary
from reef_client.render.live_scores import canary_mark, live_table, spend_table
from reef_client.render.versions import HEADERS, request_text, version_cells
from reef_contract import CANARY_HIGHEST_SHARE, CANARY_LOWEST_SHARE

VERSIONS_EXAMPLE = (
    "Example: reef versions --scenario my-harness (or ... v3 for that version's evidence; ... v3 --save DIR for a"
    " weight recipe's adapter in PEFT's layout)"
)
PROMOTE_EXAMPLE = "Example: reef promote --scenario my-harness v4   (or --canary 20 v4)"
ROLLBACK_EXAMPLE = "Example: reef rollback --scenario my-harness v2"

VersionArgument = Annotated[str, typer.Argument(help="A version (v3) or a release id (or its first 8+ characters).")]
OptionalVersionArgument = Annotated[
    str | None,
    typer.Argument(help="A version (v3) or a release id (or its first 8+ characters); none: end the canary."),
]
CanaryOption = Annotated[
    float | None,
    typer.Option(
        "--canary",
        min=CANARY_LOWEST_SHARE,
        max=CANARY_HIGHEST_SHARE,
        help="Serve the version to this percentage of new sessions beside the served one, instead of promoting it.",
        show_default=False,
    ),
]


def versions(
    scenario: ScenarioOption,
    version: Annotated[
        str | None, typer.Argument(help="Show this version's evidence (v3, or a release id) instead of the list.")
    ] = None,
    save: Annotated[
        Path | None,
        typer.Option(
            "--save",
            help="With a version of a weight recipe: write its LoRA adapter into this folder, in PEFT's layout.",
            show_default=False,
        ),
    ] = None,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """List a scenario's harness versions, oldest first: release, operation, result, status, request.

    Every step is listed, also one that published no release (rejected or skipped), except a weight recipe's
    critic-only steps, which changed no weights (SAO's critic warm-up). With a version: its
    evidence table, what the evaluation gate compared (task, kind, served, candidate, verdict, judge's reason).
    With a version and --save DIR: a weight recipe's LoRA adapter of that version, written as PEFT saves one
    (adapter_config.json, adapter_model.safetensors), which transformers, peft, vLLM and SGLang load as it is.
    """
    if save is not None:
        if version is None:
            fail("--save needs a version: reef versions --scenario S v3 --save DIR", code=2)
        _save(scenario, version, save, json, url, token)
        return
    with daemon_client(url, token, scenario) as client:
        rows = mark_installed(scenario, client.releases(scenario))
        scores = _live_scores(client, scenario) if version is None else None
    if version is not None:
        _evidence(scenario, resolve_version(rows, version), json)
        return
    rows, critic_only = _weights_changed(rows)
    by_release = {score["release_id"]: score for score in scores["versions"]} if scores else {}
    canary = scores["canary"] if scores else None
    if json:
        shown = [{**row, "live": by_release.get(row["release_id"] or "")} for row in rows]
        print_json({"scenario": scenario, "releases": shown, **({"live": scores} if scores else {})})
        return
    table = Table(title=f"harness versions of {scenario}")
    for column in HEADERS:
        table.add_column(column, no_wrap=True)
    table.add_column("request")  # the one column that wraps on a narrow terminal
    for row in reversed(rows):
        *cells, status = version_cells(row, installed=row["installed"])
        status = ", ".join(mark for mark in (status, canary_mark(row["release_id"], canary)) if mark)
        table.add_row(*cells, status, request_text(row))
    console().print(table)
    if critic_only:
        error_console().print(
            f"[dim]{critic_only} critic-only steps (the value head trained, the weights did not change) are not"
            " versions and not listed; `reef status` counts every step[/dim]"
        )
    if scores:
        console().print(live_table(scores, rows))
        if scores["versions"]:
            console().print(spend_table(scores, rows))


def _save(scenario: str, version: str, folder: Path, json: bool, url: str | None, token: str | None) -> None:
    with daemon_client(url, token, scenario) as client:
        target, release_id = _published(client, scenario, version)
        files = client.release_files(scenario, release_id)
    # The names come from the daemon: each must be a file of the folder, never a path out of it.
    if unsafe := sorted(name for name in files if Path(name).name != name or name in ("", ".", "..")):
        fail(f"the daemon named release files that are not plain file names ({', '.join(unsafe)}); nothing saved")
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    names = sorted(files)
    saved = {
        "scenario": scenario,
        "version": target["version"],
        "release_id": release_id,
        "folder": str(folder),
        "files": names,
    }
    print_answer(saved, json, f"saved {target['version']} of {scenario} to {folder}: {', '.join(names)}")


def _weights_changed(rows: list[ShownRelease]) -> tuple[list[ShownRelease], int]:
    """The rows a user calls versions, and how many weight-training steps were left out because they changed no
    weights (SAO's critic warm-up, or a step with nothing to learn from)."""
    kept = [
        row for row in rows if row["version"] is not None or (row["metrics"] or {}).get("policy_updated") is not False
    ]
    return kept, len(rows) - len(kept)


def _live_scores(client: ReefClient, scenario: str) -> VersionScores | None:
    """The per-version live scores; None from a daemon that keeps none (the table then shows releases alone)."""
    try:
        return client.version_scores(scenario)
    except ApiError as exc:
        if exc.status in (404, 405, 501):
            return None
        raise


def _evidence(scenario: str, row: ReleaseRow, json: bool) -> None:
    evidence = evidence_of(row["metrics"])
    if json:
        print_json({"scenario": scenario, "version": row["version"], "release": row, "evidence": evidence})
        return
    console().print(f"{row['version']} ({row['result']}): {evidence_summary(evidence)}")
    if evidence is None or not evidence["rows"]:
        return
    table = Table(title=f"evidence for {row['version']} of {scenario}")
    for column in EVIDENCE_HEADERS:
        table.add_column(column, no_wrap=column in ("kind", "verdict"))
    for evidence_row in evidence["rows"]:
        table.add_row(*evidence_cells(evidence_row))
    console().print(table)


def promote(
    scenario: ScenarioOption,
    version: VersionArgument,
    canary: CanaryOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Serve a pending version (one that changes an extension): republished as a new version; this ends a canary.

    With --canary N the version is instead served to N% of new sessions beside the served version (installs hold
    both; `reef-<agent> update` brings them up to date). It is rolled back on its own if it scores clearly worse.
    """
    if canary is None:
        _change(scenario, version, "promote", url, token)
        return
    with daemon_client(url, token, scenario) as client:
        _target, release_id = _published(client, scenario, version)
        state = client.start_canary(scenario, release_id, canary)
    console().print(
        f"canary: {state['version']} serves {state['share']:g}% of new sessions beside the served version; "
        f"`reef promote --scenario {scenario} {state['version']}` serves it to all,"
        f" `reef rollback --scenario {scenario}` ends it"
    )


def rollback(
    scenario: ScenarioOption, version: OptionalVersionArgument = None, url: UrlOption = None, token: TokenOption = None
) -> None:
    """Serve an earlier version again: republished as a new version (history is never rewritten); this ends a
    canary. Without a version, end the running canary only."""
    if version is not None:
        _change(scenario, version, "rollback", url, token)
        return
    with daemon_client(url, token, scenario) as client:
        ended = client.end_canary(scenario)["ended"]
    if ended is None:
        fail(f"no canary runs in {scenario}; name a version to roll back to", code=2)
    console().print(f"ended the canary of {ended['version']}: every new session runs the served version")


def _change(scenario: str, version: str, operation: str, url: str | None, token: str | None) -> None:
    with daemon_client(url, token, scenario) as client:
        target, release_id = _published(client, scenario, version)
        step = client.change_release(scenario, operation, release_id)
    verb = "promoted" if operation == "promote" else "rolled back to"
    release = (step["release_id"] or "")[:8]
    console().print(f"{verb} {target['version']}: now serving {step['version']} (release {release})")


def _published(client: ReefClient, scenario: str, version: str) -> tuple[ReleaseRow, str]:
    """The row `version` names and its release id; exits with a message when it published no release."""
    target = resolve_version(client.releases(scenario), version)
    if target["release_id"] is None:
        fail(f"{target['version']} published no release; choose a version that did")
    return target, target["release_id"]


def resolve_version(rows: Sequence[ReleaseRow], wanted: str) -> ReleaseRow:
    """The row a version (`v3`) or a release id prefix names; exits with a message when none or several do."""
    wanted = wanted.strip()
    by_version = [row for row in rows if row["version"] == wanted]
    if by_version:
        return by_version[0]
    if len(wanted) >= 8:
        matches = [row for row in rows if row["release_id"] and row["release_id"].startswith(wanted)]
        if len(matches) == 1:
            return matches[0]
    known = ", ".join(row["version"] for row in reversed(rows) if row["version"])
    fail(f"no version '{wanted}' (known: {known}); name one as vN or by its release id")
