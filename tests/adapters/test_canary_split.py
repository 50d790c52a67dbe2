"""The canary split the wrapper makes at session start: over many sessions near the share asked for, and the same
answer for the same session every time."""

from __future__ import annotations

import uuid

import pytest

from adapters.wrapper.canary import in_canary


@pytest.mark.parametrize("share", [5.0, 20.0, 50.0, 90.0])
def test_the_split_is_near_the_share_asked_for(share: float) -> None:
    sessions = [uuid.UUID(int=n * 7919 + 1).hex for n in range(20000)]
    picked = sum(in_canary(session, share) for session in sessions)
    assert picked / len(sessions) * 100 == pytest.approx(share, abs=1.0)


def test_a_session_always_gets_the_same_answer_and_a_larger_share_keeps_it() -> None:
    sessions = [uuid.uuid4().hex for _ in range(2000)]
    first = [in_canary(session, 20.0) for session in sessions]
    assert [in_canary(session, 20.0) for session in sessions] == first
    # Growing the canary only adds sessions: none that ran it leaves it.
    assert all(in_canary(session, 40.0) for session, picked in zip(sessions, first, strict=True) if picked)
    assert not any(in_canary(session, 0.0) for session in sessions)
