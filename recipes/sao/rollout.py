"""A scored rollout, read from an inference record and the report that scored it, and the rules that make it
eligible for training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reef_daemon.contract import IMPORTED_TAG
from reef_daemon.recipe_api import Eligible, Ineligible, Verdict

# An imported conversation was sampled elsewhere: there are no log-probs of this model to train on.
IMPORTED_REASON = "imported: no log-probs (the conversation was not sampled by this model)"


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
    temperature: float
    group: str  # for the GRPO control: rollouts of the same prompt form a group


def parse_version(version: str) -> tuple[str, int] | None:
    incarnation, _, sequence = version.rpartition(":")
    return (incarnation, int(sequence)) if incarnation and sequence.isdigit() else None


def judge_report(
    report: dict[str, Any], current_version: str, max_staleness: int, claimed: set[str]
) -> tuple[Verdict, Rollout | None]:
    """Is this report an eligible scored rollout? Returns the verdict and, when eligible, the rollout."""
    score = report.get("score")
    if not isinstance(score, int | float) or not math.isfinite(score):
        return Ineligible("the report has no score"), None
    referenced = report.get("referenced") or []
    if len(referenced) != 1:
        return Ineligible("the report must reference exactly one inference record"), None
    (record,) = referenced
    if record.get("consumed_by") is not None or record["id"] in claimed:
        return Ineligible("the rollout was already trained on"), None
    if IMPORTED_TAG in (record.get("tags") or {}):
        return Ineligible(IMPORTED_REASON), None
    tokens = record.get("tokens")
    if not tokens or not tokens.get("output_ids"):
        return Ineligible("the rollout has no token data from this runtime (it was not served by the model)"), None
    if not record.get("complete"):
        return Ineligible("the rollout is incomplete"), None
    verdict = _staleness(tokens.get("versions") or [], current_version, max_staleness)
    if verdict is not None:
        return verdict, None
    temperature = _sampled_temperature(record, tokens)
    rollout = Rollout(
        record_id=str(record["id"]),
        report_id=str(report["id"]),
        prompt_ids=tuple(int(t) for t in tokens["prompt_ids"]),
        output_ids=tuple(int(t) for t in tokens["output_ids"]),
        logprobs=tuple(float(p) for p in tokens["logprobs"]),
        versions=tuple(str(v) for v in tokens["versions"]),
        reward=float(score),
        temperature=temperature,
        group=",".join(str(t) for t in tokens["prompt_ids"]),
    )
    return Eligible(), rollout


def _sampled_temperature(record: dict[str, Any], tokens: dict[str, Any]) -> float:
    """The temperature the rollout was sampled at: as the runtime recorded it (a request that set none got the
    runtime's default), else as the request asked. Greedy log-probs are the model's own, at temperature 1."""
    sampling, request = tokens.get("sampling"), record.get("request")
    temperature = request.get("temperature", 1.0) if isinstance(request, dict) else 1.0
    if isinstance(sampling, dict):
        temperature = sampling.get("temperature", temperature)
    return float(temperature) if isinstance(temperature, int | float) and temperature > 0 else 1.0


def _staleness(versions: list[str], current: str, max_staleness: int) -> Ineligible | None:
    now = parse_version(current)
    produced = [parse_version(str(v)) for v in versions]
    if now is None or not produced or any(p is None for p in produced):
        return Ineligible("the rollout's weight versions cannot be read")
    if any(p is not None and p[0] != now[0] for p in produced):
        return Ineligible("the rollout was generated before the model was last loaded (another incarnation)")
    oldest = min(p[1] for p in produced if p is not None)
    lag = now[1] - oldest
    if lag > max_staleness:
        return Ineligible(f"the rollout is older than training.max-staleness ({max_staleness}) allows")
    return None
