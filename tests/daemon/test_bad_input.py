"""Bad input gets a JSON error that names the problem, and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.reef_testing import CHAT, Reef, StartReef


async def error_of(response: Any, status: int) -> dict[str, str]:
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    body = await response.json()
    assert set(body) == {"error"} and body["error"]["message"]
    assert "x-reef-overhead-ms" in response.headers
    return dict(body["error"])


async def nothing_stored(reef: Reef) -> None:
    assert await reef.records() == []
    assert reef.upstream.received == []


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"model": "m", "messages": [', "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b"", "empty"),
        (b'{"x": NaN}', "NaN"),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "hi \\ud800"}]}',
            "messages[0].content: holds a lone surrogate",
        ),
    ],
)
async def test_malformed_inference_body(reef: Reef, body: bytes, words: str) -> None:
    error = await error_of(await reef.post("/v1/chat/completions", data=body), 400)
    assert error["type"] == "invalid_json" and words in error["message"]
    await nothing_stored(reef)


@pytest.mark.parametrize("header", [None, "", "  "])
async def test_missing_scenario_header(reef: Reef, header: str | None) -> None:
    response = await reef.post("/v1/messages", CHAT, scenario=header)
    error = await error_of(response, 400)
    assert error["type"] == "missing_scenario" and "x-reef-scenario" in error["message"]
    await nothing_stored(reef)


@pytest.mark.parametrize("name", ["a/b", "..", ".", "x" * 129, "spa ce", "semi;colon"])
async def test_bad_scenario_names(reef: Reef, name: str) -> None:
    error = await error_of(await reef.post("/v1/chat/completions", CHAT, scenario=name), 400)
    assert error["type"] == "invalid_scenario"
    await nothing_stored(reef)
    assert (await (await reef.get("/reef/scenarios")).json())["scenarios"] == []


async def test_body_over_the_limit_is_refused_before_reading(start_reef: StartReef) -> None:
    reef = await start_reef(reef__max_body_mb="0.001")  # about 1 KiB
    error = await error_of(await reef.post("/v1/chat/completions", data=b"{" + b" " * 4096 + b"}"), 413)
    assert error["type"] == "payload_too_large" and "max-body-mb" in error["message"]
    await nothing_stored(reef)


async def test_unknown_route_and_method(reef: Reef) -> None:
    assert (await error_of(await reef.get("/v1/nothing"), 404))["type"] == "not_found"
    assert (await error_of(await reef.get("/v1/chat/completions"), 405))["type"] == "method_not_allowed"


async def receipt(reef: Reef, scenario: str = "demo") -> str:
    response = await reef.post("/v1/chat/completions", CHAT, scenario=scenario)
    assert response.status == 200
    return response.headers["x-reef-agent-record-id"]


@pytest.mark.parametrize(
    ("report", "words"),
    [
        ({"score": True}, "score must be a number"),
        ({"score": "0.8"}, "score must be a number, not text: write 0.8 without quotes"),
        ({"score": "high"}, "score must be a number, not text ('high')"),
        ({"feedback": 3}, "feedback must be a string or object"),
        ({"score": 1, "references": "abc"}, "references must be an array"),
        ({"score": 1, "references": ["not-a-receipt"]}, "references.0 is not a receipt"),
        ({"score": 1, "metadata": []}, "metadata must be an object"),
        ({"score": 1, "extra": 1}, "unknown field extra"),
        ({"metadata": {}}, "needs a score, feedback, or both"),
        ({"score": 1, "agent_record_id": ""}, "agent_record_id"),
    ],
)
async def test_report_field_errors(reef: Reef, report: dict[str, Any], words: str) -> None:
    await receipt(reef)
    error = await error_of(await reef.post("/reef/report", report), 400)
    assert error["type"] == "invalid_report"
    assert words in error["message"]
    assert await reef.records(type="report") == []


async def test_report_with_infinite_score_is_refused(reef: Reef) -> None:
    error = await error_of(await reef.post("/reef/report", data=b'{"score": Infinity}'), 400)
    assert "Infinity" in error["message"]


async def test_report_reference_rules(reef: Reef) -> None:
    mine = await receipt(reef)
    foreign = await receipt(reef, scenario="other")
    unknown = "0" * 32

    error = await error_of(await reef.post("/reef/report", {"score": 1, "references": [unknown]}), 400)
    assert error["type"] == "unknown_reference" and unknown in error["message"]
    error = await error_of(await reef.post("/reef/report", {"score": 1, "references": [foreign]}), 400)
    assert error["type"] == "foreign_reference"
    error = await error_of(await reef.post("/reef/report", {"score": 1, "references": [mine, mine]}), 400)
    assert "same receipt twice" in error["message"]

    accepted = await reef.post("/reef/report", {"score": 1, "references": [mine]})
    report_id = (await accepted.json())["agent_record_id"]
    error = await error_of(await reef.post("/reef/report", {"score": 1, "references": [report_id]}), 400)
    assert "not a receipt" in error["message"] or error["type"] == "bad_reference"
    assert len(await reef.records(type="report")) == 1


async def test_the_score_scale_is_a_setting_shown_in_status_and_enforced(start_reef: StartReef) -> None:
    reef = await start_reef(reports__score_min="1", reports__score_max="5")
    status = await (await reef.get("/reef/status")).json()
    assert status["score_scale"] == {"min": 1.0, "max": 5.0}
    mine = await receipt(reef)
    error = await error_of(await reef.post("/reef/report", {"score": 0, "references": [mine]}), 400)
    assert error["type"] == "score_out_of_scale"
    assert error["message"] == "score 0 is outside this deployment's scale: from 1 (worst) to 5 (best)"
    accepted = await reef.post("/reef/report", {"score": 5, "references": [mine]})
    assert accepted.status == 200


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b'{"record_id": "x", "score": 1, "feedback": "bad \\ud800 text"}', "feedback: holds a lone surrogate"),
        (b'{"record_id": "x", "score": 1, "tags": {"k": ["ok", "\\udfff"]}}', "tags.k[1]: holds a lone surrogate"),
    ],
)
async def test_a_lone_surrogate_in_a_report_is_refused_with_its_field(reef: Reef, body: bytes, where: str) -> None:
    error = await error_of(await reef.post("/reef/report", data=body), 400)
    assert error["type"] == "invalid_json" and where in error["message"]
    await nothing_stored(reef)
