"""Report validation against the JSON Schema files in this folder.

`report.schema.json` is the contract every deployment enforces; a recipe may add a stricter schema of its own.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from reef_contract import (
    PERSON_SOURCE,
    RECEIPT_HEADER,
    ReportSource,
    off_the_scale,
    report_source,
    score_problem,
)
from reef_daemon.errors import BadRequest

BASE_SCHEMA = "report.schema.json"


def load_schema(name: str = BASE_SCHEMA) -> dict[str, Any]:
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


class ReportValidator:
    """Checks a report body against the base schema, the deployment's score scale and any schema the recipe adds."""

    def __init__(
        self, extra_schemas: tuple[dict[str, Any], ...] = (), *, score_scale: tuple[float, float] = (0.0, 1.0)
    ) -> None:
        self.score_scale = score_scale
        self._validators = [Draft202012Validator(load_schema())]
        self._validators += [Draft202012Validator(schema) for schema in extra_schemas]

    def validate(self, body: Any) -> dict[str, Any]:
        """The normalised report content, or a 400 naming the first field at fault. A derived report (a `source`
        other than a person) scores exactly one record, and its score is clamped to the scale: a derived score
        comes from a program or a model, not from a person who can be told their score is out of range."""
        if not isinstance(body, dict):
            raise BadRequest("the report must be a JSON object", type="invalid_report")
        if "score" in body and (problem := score_problem(body["score"])) is not None:
            raise BadRequest(problem, type="invalid_report")
        for validator in self._validators:
            error = next(iter(sorted(validator.iter_errors(body), key=lambda e: list(e.path))), None)
            if error is not None:
                raise BadRequest(_describe(error), type="invalid_report")
        content: dict[str, Any] = {"references": list(body.get("references", []))}
        for key in ("score", "feedback", "metadata", "evidence"):
            if key in body:
                content[key] = body[key]
        if report_source_of(body) == PERSON_SOURCE:
            if "evidence" in content:
                raise BadRequest("evidence is for derived reports (a source other than person)", type="invalid_report")
            if "score" in content:
                content["score"] = score = float(content["score"])
                if (off := off_the_scale(score, *self.score_scale)) is not None:
                    raise BadRequest(off, type="score_out_of_scale")
            return content
        if "score" not in content or len(content["references"]) != 1:
            raise BadRequest("a derived report gives a score to exactly one record", type="invalid_report")
        content["score"] = self.clamped(float(content["score"]))
        return content

    def clamped(self, score: float) -> float:
        """A derived score moved onto the scale: never a score outside it."""
        low, high = self.score_scale
        return min(high, max(low, score))


def report_source_of(body: dict[str, Any]) -> ReportSource:
    """Where a validated report body says its score came from; a person when it does not say."""
    return report_source(str(body.get("source", PERSON_SOURCE))) or PERSON_SOURCE


def content_hash(scenario: str, content: dict[str, Any]) -> str:
    """Identity of a report's content, for telling a retry from a conflicting reuse of an id."""
    canonical = json.dumps([scenario, content], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _describe(error: ValidationError) -> str:
    field = ".".join(str(part) for part in error.absolute_path) or None
    validator = error.validator
    if validator == "additionalProperties":
        schema = error.schema if isinstance(error.schema, dict) else {}
        known = schema.get("properties", {})
        given = error.instance if isinstance(error.instance, dict) else {}
        extra = sorted(set(given) - set(known if isinstance(known, dict) else {}))
        known_fields = "score, feedback, references, metadata, agent_record_id, source, evidence"
        return f"unknown field {', '.join(extra)}; a report has {known_fields}"
    if validator == "anyOf" and field is None:
        return "a report needs a score, feedback, or both"
    if validator == "type":
        expected = error.validator_value
        kinds = " or ".join(expected) if isinstance(expected, list) else expected
        article = "an" if str(kinds)[0] in "aeiou" else "a"
        return f"{field} must be {article} {kinds}"
    if validator == "uniqueItems":
        return f"{field} lists the same receipt twice"
    if validator == "pattern" and field and field.startswith("references"):
        return f"{field} is not a receipt (32 hex characters, from {RECEIPT_HEADER})"
    where = field or "the report"
    return f"{where}: {error.message}"
