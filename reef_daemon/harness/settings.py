"""The `harness` section of settings: the harness recipe's proposers, trials and gate, and what the daemon's own
harness parts (replayed tasks, their regexes, canaries) read. A section of the daemon's, read as `settings.harness`."""

from __future__ import annotations

from dataclasses import dataclass

from reef_contract import HARNESS_ADAPTER_ENV, PROPOSER_SANDBOX_ENV
from reef_daemon.setting_kinds import COUNT, FRACTION, POSITIVE_INT, POSITIVE_NUMBER, TEXT, one_of, setting
from reef_daemon.untrusted_regex import COMPILE_MB, COMPILE_S


@dataclass(frozen=True)
class HarnessSection:
    """Knobs of harness versions: how the harness recipe (reefine) proposes, tries and gates them, and how the
    daemon replays tasks and watches canaries."""

    adapter: str = setting(
        "pi",
        TEXT,
        env=HARNESS_ADAPTER_ENV,
        help="the agent a harness recipe renders for: pi, codex, dsh, claude or opencode",
    )
    max_tokens: int = setting(
        8192,
        POSITIVE_INT,
        help="the most tokens the proposer asks the model for in one answer (unset: 512 with the embedded model)",
    )
    trial: str = setting(
        "auto",
        TEXT,
        help="before publishing, start the agent on the candidate once: auto (where the adapter's binary is on "
        "PATH), off, or the binary's path",
    )
    sandbox: str = setting(
        "bwrap",
        TEXT,
        env=PROPOSER_SANDBOX_ENV,
        help="where trial runs execute: bwrap (a bubblewrap jail: no network, read-only files) or none (a plain "
        "child, for a trusted machine)",
    )
    trial_timeout_s: float = setting(
        180.0, POSITIVE_NUMBER, help="how long the trial run may take before it counts as failed"
    )
    proposer_agent: str = setting(
        "pi",
        TEXT,
        help="the agent that proposes changes as a coding agent (pi, codex, ...; off: never); the text proposer "
        "answers where it is not installed or the jail does not start",
    )
    proposer_wall_s: float = setting(
        900.0,
        POSITIVE_NUMBER,
        help="the most seconds one agent proposer run may take (unset: 240 with the embedded model)",
    )
    proposer_trial_s: float = setting(
        120.0, POSITIVE_NUMBER, help="the most seconds one harness-trial of the agent proposer may take"
    )
    proposer_model_calls: int = setting(
        200, POSITIVE_INT, help="the most model calls one agent proposer run may make, its trials included"
    )
    proposer_trials: int = setting(10, POSITIVE_INT, help="the most harness-trial runs in one agent proposer run")
    gate_max_worse: int = setting(
        0, COUNT, help="the evaluation gate publishes a candidate only if at most this many protected tasks got worse"
    )
    gate_judge: str = setting(
        "pairwise",
        one_of("JUDGE", "pairwise", "ranked"),
        help="how the gate's judge compares a candidate's answer with the served version's where a task has no regex: "
        "pairwise (asked in both orders, two calls) or ranked (both scored against each other in one call)",
    )
    eval_wall_s: float = setting(
        900.0,
        POSITIVE_NUMBER,
        help="the most seconds the evaluation gate spends on one candidate, all runs together (unset: 240 with the "
        "embedded model)",
    )
    eval_model_calls: int = setting(
        200, POSITIVE_INT, help="the most model calls the evaluation gate may make for one candidate (agents and judge)"
    )
    eval_parallel: int = setting(
        2,
        POSITIVE_INT,
        help="how many tasks the evaluation gate runs at once, each on the served version and the candidate side by "
        "side (so twice as many agent runs in flight)",
    )
    replays: int = setting(
        3,
        COUNT,
        help="how many of a scenario's most recent low-scored conversations are replayed as evaluation tasks (0: none)",
    )
    max_tasks: int = setting(200, POSITIVE_INT, help="the most evaluation tasks one scenario may hold")
    max_task_fixture_chars: int = setting(
        20_000_000,
        POSITIVE_INT,
        help="the most characters the fixtures (workspace files) of one scenario's tasks may hold together",
    )
    regex_compile_s: float = setting(
        COMPILE_S,
        POSITIVE_NUMBER,
        help="the most CPU seconds compiling a task's regex may take; a slower one is refused (behaviour checks and "
        "harness-trial --expect are held to the default)",
    )
    regex_compile_mb: int = setting(
        COMPILE_MB,
        POSITIVE_INT,
        help="the most MiB compiling a task's regex may take; a larger one is refused (behaviour checks and "
        "harness-trial --expect are held to the default)",
    )
    canary_min_scored: int = setting(
        20,
        POSITIVE_INT,
        help="scored records a canary and the served version each need, since the canary started, before the "
        "canary can be rolled back automatically",
    )
    canary_false_rollback: float = setting(
        0.005,
        FRACTION,
        help="the most a canary that scores like the served version may be rolled back automatically (a share, "
        "0.005: one in 200), however often it is checked; smaller waits for more evidence",
    )
