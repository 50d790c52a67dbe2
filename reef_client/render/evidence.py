"""A release's evidence table in the words of the JSON: the evaluation gate's verdict on the candidate and one row
per task (the request's behaviour check, protected tasks, replays), for `reef versions vN` and the TUI alike."""

from __future__ import annotations

from typing import Any, cast

from reef_contract import Evidence, EvidenceRow

EVIDENCE_HEADERS = ("task", "kind", "served", "candidate", "verdict", "reason")


def evidence_of(metrics: dict[str, Any]) -> Evidence | None:
    """The step's evidence, where its metrics hold one in the expected shape."""
    evidence = metrics.get("evidence")
    if isinstance(evidence, dict) and isinstance(evidence.get("rows"), list):
        return cast(Evidence, evidence)  # the daemon wrote it as Evidence
    return None


def evidence_summary(evidence: Evidence | None) -> str:
    """One line: whether the gate passed the candidate and why, what it spent."""
    if evidence is None:
        return "no evidence: this version was not made by a gated step"
    if not evidence["ran"]:
        return evidence["reason"]
    verdict = "passed" if evidence["passed"] else "failed"
    spent = f"{evidence['seconds']:g} s, {evidence['model_calls']} model call(s)"
    return f"gate {verdict}: {evidence['reason']} ({spent})"


def evidence_cells(row: EvidenceRow) -> tuple[str, str, str, str, str, str]:
    """One row's cells under EVIDENCE_HEADERS; a protected task is marked."""
    kind = f"{row['kind']} (protected)" if row["protected"] and row["kind"] != "behaviour" else row["kind"]
    return row["task"], kind, row["served"], row["candidate"], row["verdict"], row["reason"]
