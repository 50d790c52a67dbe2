"""Live evidence through a reefine daemon: records tagged with the harness release (as installed harnesses send
them) are grouped per version with the scores their reports gave; a canary starts, survives a restart, is rolled
back automatically when it scores clearly worse (with an event saying why) and not on noise, and a promote ends it."""

from __future__ import annotations

import statistics
from typing import Any

from reef_contract import CANARY_DIR, CANARY_EVENT
from reef_daemon.context import DAEMON
from reef_daemon.harness.canary import check_canary
from reef_daemon.harness.score_stats import summarize_scores
from tests.support.fake_proposer_model import answer, skill
from tests.support.reefine_testing import SCENARIO, Reefine, StartReefine
from tests.support.waiting import eventually

EXTENSION = {"id": "bell", "kind": "extension", "config": {"name": "bell", "code": "export default () => {}\n"}}
SCORES = f"/reef/scenarios/{SCENARIO}/versions/scores"
CANARY = f"/reef/scenarios/{SCENARIO}/canary"


async def served_and_pending(reefine: Reefine) -> tuple[str, str]:
    """v1 (a skill, served) and v2 (an extension, pending review): their release ids."""
    reefine.model.script("answer", answer("One.\n\nHow to use: ask.", skill("one")))
    assert (await reefine.settled(await reefine.train("first change")))["result"] == "selected"
    reefine.model.script("answer", answer("Bell.\n\nHow to use: it rings.", EXTENSION))
    assert (await reefine.settled(await reefine.train("ring a bell")))["result"] == "pending"
    rows = {row["version"]: row["release_id"] for row in await reefine.releases()}
    return rows["v1"], rows["v2"]


async def session_call(reefine: Reefine, release: str, session: str, score: float | None) -> str:
    """One model call as an installed harness makes it (scenario, release and session headers), then its score."""
    chat = {"model": "fake-proposer", "messages": [{"role": "user", "content": "capital of France?"}]}
    headers = {**reefine.headers(), "x-reef-tag-release": release, "x-reef-tag-session": session}
    async with reefine.session.post(reefine.url + "/v1/chat/completions", json=chat, headers=headers) as sent:
        assert sent.status == 200, await sent.text()
        receipt = sent.headers["x-reef-agent-record-id"]
    if score is not None:
        await reefine.ok("POST", "/reef/report", {"score": score, "references": [receipt]})
    return receipt


def by_release(scores: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["release_id"]: row for row in scores["versions"]}


async def test_records_tagged_with_a_release_are_scored_per_version(reefine: Reefine) -> None:
    v1, v2 = await served_and_pending(reefine)
    v1_scores = [0.9, 0.7, 0.8, 0.3, 1.0]
    for index, score in enumerate(v1_scores):
        await session_call(reefine, v1, f"s{index % 3}", score)  # three sessions
    await session_call(reefine, v1, "s0", None)  # unscored: counted, not in the mean
    await session_call(reefine, v2, "s9", 0.2)

    shown = await reefine.ok("GET", SCORES)
    assert (shown["score_min"], shown["score_max"], shown["low_below"], shown["confidence"]) == (0.0, 1.0, 0.5, 0.95)
    first, second = by_release(shown)[v1], by_release(shown)[v2]
    assert (first["sessions"], first["records"], first["scored"]) == (3, 6, 5)
    direct = summarize_scores(v1_scores, 0.5)
    assert first["mean"] == statistics.mean(v1_scores) == direct.mean
    assert direct.interval is not None
    assert (first["interval"]["low"], first["interval"]["high"]) == (direct.interval[0], 1.0)  # clipped to the scale
    assert direct.interval[1] > 1.0
    assert first["low_share"] == 1 / 5
    assert len(first["trend"]) == 12 and any(value is not None for value in first["trend"])
    assert (second["sessions"], second["records"], second["scored"], second["mean"]) == (1, 1, 1, 0.2)
    assert second["interval"] is None and second["low_share"] == 1.0
    assert shown["canary"] is None


async def test_a_canary_survives_a_restart_and_a_promote_ends_it(start_reefine: StartReefine) -> None:
    reefine = await start_reefine()
    _v1, v2 = await served_and_pending(reefine)
    for share in (120, 100, 99.5, 0.5, 5e-324, 0):
        status, refused = await reefine.call("POST", CANARY, {"release_id": v2, "share": share})
        assert status == 400 and "a percentage from 1 to 99" in refused["error"]["message"], share
    started = (await reefine.ok("POST", CANARY, {"release_id": v2, "share": 20}))["canary"]
    assert (started["version"], started["share"]) == ("v2", 20.0)

    again = await start_reefine()  # the same state directory
    assert (await again.ok("GET", CANARY))["canary"] == started
    await again.ok("POST", f"/reef/scenarios/{SCENARIO}/promote", {"release_id": v2})
    assert (await again.ok("GET", CANARY))["canary"] is None
    events = await again.server.app[DAEMON].store.events.after(0, SCENARIO)
    said = [(event.data["action"], event.data["reason"]) for event in events if event.type == CANARY_EVENT]
    assert said == [("started", "v2 serves 20% of new sessions"), ("ended", "promote made v3 the served version")]


async def test_a_canary_that_scores_clearly_worse_is_rolled_back_and_noise_is_not(start_reefine: StartReefine) -> None:
    reefine = await start_reefine(harness__canary_min_scored=8)
    v1, v2 = await served_and_pending(reefine)
    await reefine.ok("POST", CANARY, {"release_id": v2, "share": 20})
    daemon = reefine.server.app[DAEMON]

    # Noise: both score alike, with enough scores each; the canary keeps running.
    for index in range(16):
        await session_call(reefine, v1, f"served-{index}", [0.6, 0.8, 0.7, 0.9][index % 4])
        await session_call(reefine, v2, f"canary-{index}", [0.7, 0.9, 0.6, 0.8][index % 4])
    assert await check_canary(daemon, SCENARIO) is None
    assert (await reefine.ok("GET", CANARY))["canary"] is not None

    # Clearly worse: the canary's scores fall until the sequential test has the evidence.
    for index in range(40):
        await session_call(reefine, v2, f"canary-low-{index}", [0.1, 0.0, 0.2][index % 3])
    await eventually(
        lambda: reefine.ok("GET", CANARY), 30, "the rolled back canary", satisfied=lambda shown: not shown["canary"]
    )
    events = await daemon.store.events.after(0, SCENARIO)
    rolled = [event.data for event in events if event.type == CANARY_EVENT and event.data["action"] == "rolled_back"]
    assert len(rolled) == 1 and rolled[0]["canary"]["version"] == "v2"
    assert rolled[0]["reason"].startswith("rolled back automatically: v2 scored ")
    assert "clearly below the served version scored 0.75 [" in rolled[0]["reason"]
    assert "since the canary started" in rolled[0]["reason"]
    # The served version is unchanged: rolling a canary back only stops it.
    assert next(row for row in await reefine.releases() if row["current"])["version"] == "v1"


async def test_the_canary_is_compared_with_the_served_version_over_its_own_period(
    start_reefine: StartReefine,
) -> None:
    """The served version scored high before the canary started; since then both score alike: no rollback."""
    reefine = await start_reefine(harness__canary_min_scored=8)
    v1, v2 = await served_and_pending(reefine)
    for index in range(12):
        await session_call(reefine, v1, f"before-{index}", 1.0)
    await reefine.ok("POST", CANARY, {"release_id": v2, "share": 20})
    for index in range(12):
        await session_call(reefine, v1, f"served-{index}", [0.3, 0.5, 0.4][index % 3])
        await session_call(reefine, v2, f"canary-{index}", [0.4, 0.3, 0.5][index % 3])
    assert await check_canary(reefine.server.app[DAEMON], SCENARIO) is None
    assert (await reefine.ok("GET", CANARY))["canary"] is not None


async def test_a_canary_of_an_earlier_version_is_promoted_to_all(reefine: Reefine) -> None:
    """`reef promote v1` while v1 runs as a canary serves it to everyone, though v1 was never pending review."""
    v1, _v2 = await served_and_pending(reefine)
    reefine.model.script("answer", answer("Two.\n\nHow to use: ask.", skill("two")))
    assert (await reefine.settled(await reefine.train("second change")))["result"] == "selected"  # v3 serves
    await reefine.ok("POST", CANARY, {"release_id": v1, "share": 20})
    promoted = await reefine.ok("POST", f"/reef/scenarios/{SCENARIO}/promote", {"release_id": v1})
    assert (promoted["version"], promoted["current"]) == ("v4", True)
    assert (await reefine.ok("GET", CANARY))["canary"] is None
    assert (await canary_events(reefine))[-1] == ("ended", "v1", "promote made v4 the served version")


async def canary_events(reefine: Reefine) -> list[tuple[str, str, str]]:
    events = await reefine.server.app[DAEMON].store.events.after(0, SCENARIO)
    return [
        (event.data["action"], event.data["canary"]["version"], event.data["reason"])
        for event in events
        if event.type == CANARY_EVENT
    ]


async def test_a_second_canary_ends_the_first_with_an_event(reefine: Reefine) -> None:
    _v1, v2 = await served_and_pending(reefine)
    reefine.model.script("answer", answer("Gong.\n\nHow to use: it rings.", {**EXTENSION, "id": "gong"}))
    assert (await reefine.settled(await reefine.train("ring a gong")))["result"] == "pending"
    v3 = next(row["release_id"] for row in await reefine.releases() if row["version"] == "v3")
    await reefine.ok("POST", CANARY, {"release_id": v2, "share": 20})
    assert (await reefine.ok("POST", CANARY, {"release_id": v3, "share": 30}))["canary"]["version"] == "v3"
    assert await canary_events(reefine) == [
        ("started", "v2", "v2 serves 20% of new sessions"),
        ("ended", "v2", "replaced by a canary of v3"),
        ("started", "v3", "v3 serves 30% of new sessions"),
    ]


async def test_a_canary_ends_when_the_recipe_serves_a_new_version(reefine: Reefine) -> None:
    """The canary ran beside v1; once the recipe serves v3 it has nothing to compare with, so it ends, saying so."""
    _v1, v2 = await served_and_pending(reefine)
    await reefine.ok("POST", CANARY, {"release_id": v2, "share": 20})
    reefine.model.script("answer", answer("Two.\n\nHow to use: ask.", skill("two")))
    step = await reefine.settled(await reefine.train("second change"))
    assert step["result"] == "selected"
    assert (await reefine.ok("GET", CANARY))["canary"] is None
    (action, version, reason) = (await canary_events(reefine))[-1]
    assert (action, version) == ("ended", "v2") and reason.endswith("made v3 the served version")


async def test_only_the_scenarios_releases_are_listed_as_versions(reefine: Reefine) -> None:
    v1, _v2 = await served_and_pending(reefine)
    await session_call(reefine, v1, "s1", 0.9)
    await session_call(reefine, "made-up-by-a-client", "s2", 0.1)
    await session_call(reefine, "0" * 40, "s3", 0.1)
    assert [row["release_id"] for row in (await reefine.ok("GET", SCORES))["versions"]] == [v1]


async def test_an_archived_scenarios_canary_does_not_reach_the_next_scenario_of_that_name(reefine: Reefine) -> None:
    _v1, v2 = await served_and_pending(reefine)
    await reefine.ok("POST", CANARY, {"release_id": v2, "share": 50})
    archived = await reefine.ok("DELETE", f"/reef/scenarios/{SCENARIO}")
    install = "/reef/harness/install?adapter=pi"
    async with reefine.session.get(reefine.url + install, headers=reefine.headers()) as response:
        script = await response.text()
    assert response.status == 200 and "x-reef-install-error" not in response.headers, script
    assert CANARY_DIR not in script and v2 not in script  # the unreviewed extension stays with the archive
    assert (await reefine.ok("GET", CANARY))["canary"] is None
    # Nothing can be written under the archive's name: it stays as it was archived.
    status, refused = await reefine.call("POST", "/reef/scenarios", {"name": archived["archived_as"]})
    assert status == 409 and refused["error"]["type"] == "archived_scenario"
