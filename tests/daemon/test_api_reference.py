"""docs/api.md is the API reference written from the contract; it is regenerated here and must match, so a route,
header, environment variable or JSON shape changed in the contract shows in the reference."""

from __future__ import annotations

from pathlib import Path

from reef_contract import (
    EVENTS_ROUTE,
    PROMOTE_ROUTE,
    RECORDS_ROUTE,
    RELEASE_FILES_ROUTE,
    SCENARIO_HEADER,
    TOKEN_ENV,
)
from reef_daemon.api_reference import reference

REFERENCE = Path(__file__).parents[2] / "docs" / "api.md"


def test_the_api_reference_is_current() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == reference(), (
        "docs/api.md is stale: python -m reef_daemon.api_reference > docs/api.md"
    )


def test_the_reference_names_the_routes_headers_environment_and_shapes() -> None:
    text = reference()
    assert f"| GET | `{EVENTS_ROUTE}` |" in text and "| POST | `/reef/requests` |" in text
    assert f"`{SCENARIO_HEADER}`" in text and f"`{TOKEN_ENV}`" in text
    assert "### RecordRow" in text and "sequence: int" in text


def test_a_route_with_a_comment_of_its_own_stays_in_its_groups_table() -> None:
    text = reference()
    scenarios = text.split("Scenarios, their releases and their evaluation tasks.", 1)[1].split("\n\n", 2)[1]
    assert f"`{RELEASE_FILES_ROUTE}` | A release's files" in scenarios and f"`{PROMOTE_ROUTE}`" in scenarios
    records = text.split("Records and reports; records in and out.", 1)[1].split("\n\n", 2)[1]
    assert f"`{RECORDS_ROUTE}`" in records


def test_a_shape_without_a_docstring_borrows_none() -> None:
    assert "dict() -> new empty dictionary" not in reference()
