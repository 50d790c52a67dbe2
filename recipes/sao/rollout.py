"""A scored rollout, read from an inference record and the report that scored it, and the rules that make it
eligible for training.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from reef_contract import IMPORTED_TAG, PERSON_SOURCE, ReportSource, WeightVersion
from reef_daemon.recipe_api import Eligible, Ineligible, Unit, Verdict

# An imported conversation was sampled elsewhere: there are no log-probs of this model to train on.
IMPORTED_REASON = "imported: no log-probs (the conversation was not sampled by this model)"
# What happened to a session's code is known days after its answers were sampled, by weights long replaced, and it
# scores every answer of the session alike: it feeds live scores, replays and the harness, never a weight step.
OUTCOME_SOURCE: ReportSource = "outcome"
OUTCOME_REASON = "outcome reports feed live scores, replays and the harness; weights do not train on them"


@dataclass(frozen=True)
class Rollout:
    """What one training sample needs: the tokens as sampled, their log-probs, and the reward."""

    record_id: str
    report_id: str
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    versions: tuple[str, ...]
    reward: float
    group: str  # for the GRPO control: rollouts of the same prompt form a group
    max_lag: int = 0  # how many versions old it may be when it trains (its report's source decides)
    derived: bool = False  # scored by a report no person gave
    correction: bool = False  # a person's report on a rollout a derived one trained: trained again, consumed already


class ServedVersions:
    """The versions this daemon's full weights served, in the order it swapped them in, so that a rollout's age
    counts the swaps made since it was sampled. The sequence numbers cannot say: each swap claims the next number
    from a ledger that every daemon on the machine serving the same weights shares (`runtimes/embedded/versions.py`),
    so this daemon's first swap jumps past every number used before, and others' swaps widen the gaps while they
    run."""

    def __init__(self, first: str) -> None:
        self._order: dict[str, int] = {first: 0}

    def swapped_in(self, version: str) -> None:
        self._order.setdefault(version, len(self._order))

    def lag(self, produced: str, current: str) -> int | None:
        """How many versions `produced` is behind `current`: swaps counted where this daemon made both, else the
        sequence numbers' difference (weights pushed by someone else); None when either cannot be read or they
        are other weights (another incarnation)."""
        if produced in self._order and current in self._order:
            return self._order[current] - self._order[produced]
        return sequence_lag(produced, current)


def sequence_lag(produced: str, current: str) -> int | None:
    """The difference of two versions' sequence numbers; None when either cannot be read or their incarnations
    differ."""
    now, then = WeightVersion.parse(current), WeightVersion.parse(produced)
    if now is None or then is None or now.incarnation != then.incarnation:
        return None
    return now.sequence - then.sequence


def stale(versions: Iterable[str], current: str, max_staleness: int, served: ServedVersions | None) -> bool:
    """Is any of a rollout's versions unreadable, other weights, or more than `max_staleness` behind `current`?"""
    for version in versions:
        lag = served.lag(version, current) if served is not None else sequence_lag(version, current)
        if lag is None or lag > max_staleness:
            return True
    return False


@dataclass(frozen=True)
class Staleness:
    """How many weight versions old a rollout may be, by who scored it: `person` (training.max-staleness) for a
    person's report, `derived` (training.derived-staleness, never less than `person`) for a report derived with no
    person, and for a person's correction of one. A conversation's next turn is generated before the report on
    the turn before it can exist, so a derived report finds its rollout a version or more old."""

    person: int
    derived: int

    def allowed(self, source: str | None, correction: bool) -> tuple[int, str]:
        """The versions a rollout scored by `source` may lag, and the setting that says so."""
        if correction or (source or PERSON_SOURCE) != PERSON_SOURCE:
            return max(self.person, self.derived), "training.derived-staleness"
        return self.person, "training.max-staleness"


def judge_report(
    report: Unit,
    current_version: str,
    staleness: Staleness,
    claimed: Collection[str],
    *,
    run_started: float = 0.0,
    lineage: Sequence[str] | None = None,
    served: ServedVersions | None = None,
    corrigible: Collection[str] = (),
) -> tuple[Verdict, Rollout | None]:
    """Is this report an eligible scored rollout? Returns the verdict and, when eligible, the rollout. A rollout
    made before `run_started` (this daemon's start) is eligible only if the weights as loaded generated it: the
    weights trained in an earlier run are not the ones training now, though they share a fingerprint.

    `staleness` bounds a rollout's age by its report's source.
    A rollout a step already trained on is refused, unless a derived report trained it (its record id is in
    `corrigible`) and this is a person's report: then it trains again as a correction, with the person's score.

    `lineage` (a scenario's LoRA adapter) lists the versions that served the scenario this run, oldest first, the
    current one last: a rollout's age is then counted in the scenario's own versions, since version numbers are
    shared with the other scenarios' adapters. Otherwise `served` (full weights) counts the swaps this daemon made,
    where given, else the sequence numbers do."""
    score = report.record.get("score")
    if not isinstance(score, int | float) or not math.isfinite(score):
        return Ineligible("the report has no score"), None
    if report.record.get("source") == OUTCOME_SOURCE:
        return Ineligible(OUTCOME_REASON), None
    if len(report.referenced) != 1:
        return Ineligible("the report must reference exactly one inference record"), None
    (record,) = report.referenced
    person = (report.record.get("source") or PERSON_SOURCE) == PERSON_SOURCE
    correction = record.get("consumed_by_step") is not None and person and record["id"] in corrigible
    if record["id"] in claimed or (record.get("consumed_by_step") is not None and not correction):
        return Ineligible("the rollout was already trained on"), None
    if IMPORTED_TAG in (record.get("tags") or {}):
        return Ineligible(IMPORTED_REASON), None
    # The runtime records the sampling it used beside the token data (`sampling`), which TokenData does not list.
    tokens: dict[str, Any] | None = cast("dict[str, Any] | None", record.get("tokens"))
    if not tokens or not tokens.get("output_ids"):
        return Ineligible("the rollout has no token data from this runtime (it was not served by the model)"), None
    if not record.get("complete"):
        return Ineligible("the rollout is incomplete"), None
    if float(record.get("created_at") or 0.0) < run_started and any(
        (parsed := WeightVersion.parse(str(v))) is not None and parsed.sequence > 0
        for v in tokens.get("versions") or []
    ):
        return Ineligible("the rollout was generated by weights trained in an earlier run of the daemon"), None
    off_policy = _off_policy(record.get("request"), tokens)
    if off_policy is not None:
        return off_policy, None
    max_lag, setting_name = staleness.allowed(report.record.get("source"), correction)
    versions = [str(v) for v in tokens.get("versions") or []]
    if lineage is not None:
        verdict = _lineage_staleness(versions, lineage, max_lag, setting_name)
    else:
        verdict = _staleness(versions, current_version, max_lag, setting_name, served)
    if verdict is not None:
        return verdict, None
    rollout = Rollout(
        record_id=str(record["id"]),
        report_id=report.id,
        prompt_ids=tuple(int(t) for t in tokens["prompt_ids"]),
        output_ids=tuple(int(t) for t in tokens["output_ids"]),
        logprobs=tuple(float(p) for p in tokens["logprobs"]),
        versions=tuple(str(v) for v in tokens["versions"]),
        reward=float(score),
        group=",".join(str(t) for t in tokens["prompt_ids"]),
        max_lag=max_lag,
        derived=not person,
        correction=correction,
    )
    return Eligible(), rollout


def _off_policy(request: object, tokens: dict[str, Any]) -> Ineligible | None:
    """Why a rollout was not sampled on-policy, when it was not. The trainer's ratios are exact only for a rollout
    sampled at temperature 1, top-p 1: a greedy answer's tokens were not sampled at all (its log-probs are the
    temperature-1 ones), and top-p or another temperature changes the distribution they were drawn from. A
    request's own sampling wins over the recipe's defaults, so such rollouts exist; they are refused. The sampling
    is as the runtime recorded it (a request that set none got the runtime's default), else as the request asked."""
    sampling = tokens.get("sampling")
    used: dict[str, Any] = dict(request) if isinstance(request, dict) else {}
    if isinstance(sampling, dict):
        used.update(sampling)
    temperature, top_p = used.get("temperature", 1.0), used.get("top_p", 1.0)
    if not all(isinstance(value, int | float) and not isinstance(value, bool) for value in (temperature, top_p)):
        return Ineligible("the rollout's sampling (temperature, top_p) cannot be read")
    if temperature == 1 and top_p == 1:
        return None
    how = "greedily (temperature 0)" if temperature == 0 else f"at temperature {temperature:g}, top-p {top_p:g}"
    return Ineligible(
        f"the rollout was sampled {how}, not at temperature 1, top-p 1: it would train off-policy (ask with"
        " temperature 1 and top_p 1)"
    )


def lineage_lag(versions: Sequence[str], lineage: Sequence[str]) -> int | None:
    """How many of the scenario's versions came after the oldest that produced these tokens; None when one of them
    never served the scenario in this run."""
    if not versions or any(version not in lineage for version in versions):
        return None
    return len(lineage) - 1 - min(lineage.index(version) for version in versions)


def _lineage_staleness(
    versions: list[str], lineage: Sequence[str], max_lag: int, setting_name: str
) -> Ineligible | None:
    lag = lineage_lag(versions, lineage)
    if lag is None:
        return Ineligible("the rollout was generated by other weights than the ones this scenario trains")
    if lag > max_lag:
        return Ineligible(f"the rollout is older than {setting_name} ({max_lag}) allows")
    return None


def _staleness(
    versions: list[str], current: str, max_lag: int, setting_name: str, served: ServedVersions | None
) -> Ineligible | None:
    now = WeightVersion.parse(current)
    produced = [WeightVersion.parse(v) for v in versions]
    if now is None or not produced or any(p is None for p in produced):
        return Ineligible("the rollout's weight versions cannot be read")
    if any(p is not None and p.incarnation != now.incarnation for p in produced):
        return Ineligible("the rollout was generated by other weights than the ones loaded (another incarnation)")
    if stale(versions, current, max_lag, served):
        return Ineligible(f"the rollout is older than {setting_name} ({max_lag}) allows")
    return None
