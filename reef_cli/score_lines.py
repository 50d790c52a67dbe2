"""The JSON lines `reef score --from` reads: `{"receipt" or "references", "score", "feedback", "metadata", "id"}`.

Each line is checked here before anything is sent, so a refused line is reported with its number and reason.
A line without an `id` gets one derived from its content, so rerunning the same pipeline stores nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from reef_contract import score_problem

FIELDS = ("receipt", "references", "score", "feedback", "metadata", "id")
_RECEIPT = re.compile(r"[0-9a-f]{32}")
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class LineRefused(Exception):
    """A line that cannot be sent; the message says why, for a person fixing the pipeline."""


@dataclass(frozen=True)
class ScoreLine:
    """One valid line: the receipts it scores and the report to send for them."""

    number: int
    references: list[str]
    score: float | None
    feedback: str | dict[str, Any] | None
    metadata: dict[str, Any] | None
    id: str


def parse_line(number: int, text: str) -> ScoreLine:
    """Check one line; raises LineRefused naming the field at fault."""
    try:
        body = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise LineRefused(f"not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise LineRefused("not a JSON object")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise LineRefused(f"unknown field {', '.join(unknown)}; a line has {', '.join(FIELDS)}")
    references = _references(body)
    score = body.get("score")
    if score is not None and (problem := score_problem(score)) is not None:
        raise LineRefused(problem)
    feedback = body.get("feedback")
    if feedback is not None and not isinstance(feedback, str | dict):
        raise LineRefused("feedback must be a string or an object")
    if score is None and feedback is None:
        raise LineRefused("a line needs a score, feedback, or both")
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise LineRefused("metadata must be an object")
    report_id = body.get("id")
    if report_id is None:
        report_id = _derived_id(references, score, feedback, metadata)
    elif not isinstance(report_id, str) or not _ID.fullmatch(report_id):
        raise LineRefused("id must be 1 to 128 characters of letters, digits, '.', '_', ':' and '-'")
    return ScoreLine(number, references, None if score is None else float(score), feedback, metadata, report_id)


def _references(body: dict[str, Any]) -> list[str]:
    if "receipt" in body and "references" in body:
        raise LineRefused("give receipt or references, not both")
    if "receipt" in body:
        references = [body["receipt"]]
    elif "references" in body:
        references = body["references"]
        if not isinstance(references, list) or not references:
            raise LineRefused("references must be a non-empty list of receipts")
    else:
        raise LineRefused("a line needs a receipt (or references)")
    for receipt in references:
        if not isinstance(receipt, str) or not _RECEIPT.fullmatch(receipt):
            raise LineRefused(f"{receipt!r} is not a receipt (32 hex characters, from x-reef-agent-record-id)")
    if len(set(references)) != len(references):
        raise LineRefused("references lists the same receipt twice")
    return list(references)


def _derived_id(references: list[str], score: Any, feedback: Any, metadata: Any) -> str:
    canonical = json.dumps([references, score, feedback, metadata], sort_keys=True, separators=(",", ":"))
    return "line-" + hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
