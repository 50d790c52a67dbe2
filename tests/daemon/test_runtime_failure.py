"""A runtime that can answer no more (the embedded model's generation thread stopped) is not healthy: /healthz
answers 503 with the reason, and `reef status` lists it among the errors."""

from __future__ import annotations

import pytest

from tests.support.reef_testing import Reef

STOPPED = "the embedded model's generation thread stopped (RuntimeError: boom); restart reef"


async def test_healthz_is_ok_while_the_runtime_answers(reef: Reef) -> None:
    response = await reef.get("/healthz")
    assert response.status == 200 and await response.json() == {"ok": True}


async def test_healthz_and_status_say_why_the_runtime_cannot_answer(
    reef: Reef, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reef.daemon.runtime, "failure", lambda: STOPPED)
    response = await reef.get("/healthz")
    assert response.status == 503 and await response.json() == {"ok": False, "error": STOPPED}
    status = await (await reef.get("/reef/status")).json()
    assert STOPPED in status["errors"]
