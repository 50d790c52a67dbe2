"""docs/api.md is the API reference written from the contract; it is regenerated here and must match, so a route,
header, environment variable or JSON shape changed in the contract shows in the reference."""

from __future__ import annotations

from pathlib import Path

from reef_daemon.contract import EVENTS_ROUTE, SCENARIO_HEADER, TOKEN_ENV
from reef_daemon.contract.reference import reference

REFERENCE = Path(__file__).parents[2] / "docs" / "api.md"


def test_the_api_reference_is_current() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == reference(), (
        "docs/api.md is stale: python -m reef_daemon.contract.reference > docs/api.md"
    )


def test_the_reference_names_the_routes_headers_environment_and_shapes() -> None:
    text = reference()
    assert f"| GET | `{EVENTS_ROUTE}` |" in text and "| POST | `/reef/requests` |" in text
    assert f"`{SCENARIO_HEADER}`" in text and f"`{TOKEN_ENV}`" in text
    assert "### RecordRow" in text and "sequence: int" in text
