"""Full reefine steps driven by the scripted model: published, fixed on a retry, rejected, malformed, pending."""

from __future__ import annotations

import json

from tests.support.fake_proposer_model import answer, review, skill
from tests.support.reefine_testing import Reefine, StartReefine
from tests.support.waiting import eventually

EXTENSION = {"id": "notify", "kind": "extension", "config": {"name": "notify", "code": "export default () => {}\n"}}


async def test_a_request_is_published_as_v1_with_its_files(reefine: Reefine) -> None:
    reefine.model.script("answer", answer("Answer briefly.\n\nHow to use: just ask.", skill("brief")))
    request_id = await reefine.train("make answers brief")
    progress = await reefine.settled(request_id)
    assert progress["result"] == "selected" and progress["version"] == "v1"
    assert progress["how_to_use"] == "just ask."
    assert progress["design"].startswith("Answer briefly.")
    texts = [line["text"] for line in progress["activity"]]
    assert texts[0].startswith("started") and any("review says" in text for text in texts)
    assert texts[-1].startswith("decided: selected")

    harness = await reefine.ok("GET", "/reef/harness")
    assert harness["version"] == "v1" and harness["release_id"] == progress["release"]
    assert harness["files"]["pi-agent/skills/brief/SKILL.md"].startswith('---\nname: "brief"')
    rows = await reefine.releases()
    assert [(row["version"], row["result"], row["current"]) for row in rows] == [
        ("v1", "selected", True),
        ("v0", "selected", False),
    ]
    assert rows[0]["request"]["text"] == "make answers brief"
    # The request was fenced as data in every prompt.
    assert all("<<<REQUEST " in prompt for prompt in reefine.model.seen("answer"))


async def test_refused_then_fixed_on_the_second_attempt(reefine: Reefine) -> None:
    reefine.model.script(
        "answer",
        answer("Use a key.\n\nHow to use: ask.", skill("keyed", "Use sk-abcdefghijklmnopqrstuvwx to call it.")),
        answer("Read the key from the environment.\n\nHow to use: ask.", skill("keyed", "Read $API_KEY.")),
    )
    progress = await reefine.settled(await reefine.train("call the weather API"))
    assert progress["result"] == "selected"
    second = reefine.model.seen("answer")[1]
    assert "field 'text' contains what looks like an API key (rule api-key)" in second
    assert "sk-abcdefghijklmnopqrstuvwx" not in second  # refusals never echo the value
    rows = await reefine.releases()
    assert rows[0]["metrics"]["attempts"] == 2


async def test_rejected_by_review_after_three_attempts(reefine: Reefine) -> None:
    for _ in range(3):
        reefine.model.script("answer", answer("A rule.\n\nHow to use: ask.", skill("rule-ish")))
        reefine.model.script("review", review(False, "nothing plays a sound"))
    progress = await reefine.settled(await reefine.train("play a sound when done"))
    assert progress["result"] == "rejected" and progress["release"] is None
    assert "nothing plays a sound" in progress["reason"]
    assert "nothing plays a sound" in reefine.model.seen("answer")[1]
    served = await reefine.ok("GET", "/reef/harness")
    assert served["version"] == "v0"


async def test_malformed_json_is_retried_then_skipped(reefine: Reefine) -> None:
    reefine.model.script("answer", "Sure! Here is my answer: [{design: oops", "not json", "still {not json")
    progress = await reefine.settled(await reefine.train("be helpful"))
    assert progress["result"] == "skipped"
    assert "no usable answer" in progress["reason"]

    reefine.model.script("answer", "```json\nnope\n```", answer("Fine.\n\nHow to use: ask.", skill("fine")))
    progress = await reefine.settled(await reefine.train("be helpful, again"))
    assert progress["result"] == "selected" and progress["version"] == "v1"  # the skipped step took no number


async def test_skipped_steps_take_no_version_and_extensions_wait_for_promote(reefine: Reefine) -> None:
    reefine.model.script("answer", "garbage", "garbage", "garbage")
    skipped = await reefine.settled(await reefine.train("first"))
    reefine.model.script("answer", answer("Notify.\n\nHow to use: it notifies.", EXTENSION))
    pending = await reefine.settled(await reefine.train("notify me when done"))
    assert (skipped["version"], pending["version"], pending["result"]) == (None, "v1", "pending")
    assert (await reefine.ok("GET", "/reef/harness"))["version"] == "v0"  # pending is not served

    rows = await reefine.releases()
    assert rows[0]["pending"] is True and rows[0]["current"] is False
    promoted = await reefine.ok("POST", "/reef/scenarios/harness/promote", {"release_id": pending["release"]})
    assert promoted["version"] == "v2" and promoted["operation"] == "promote"
    served = await reefine.ok("GET", "/reef/harness")
    assert served["version"] == "v2" and "pi-agent/extensions/notify.ts" in served["files"]
    rows = await reefine.releases()
    # Every step is listed; only those that made a release are numbered, without gaps.
    assert [(row["step"], row["version"], row["result"]) for row in rows] == [
        (3, "v2", "selected"), (2, "v1", "pending"), (1, None, "skipped"), (0, "v0", "selected"),
    ]  # fmt: skip
    by_version = {row["version"]: row for row in rows}
    assert by_version["v1"]["pending"] is False and by_version["v1"]["promoted_as"] == "v2"
    status, again = await reefine.call("POST", "/reef/scenarios/harness/promote", {"release_id": pending["release"]})
    assert status == 409 and again["error"]["type"] == "already_promoted"


async def test_rollback_republishes_an_older_version(reefine: Reefine) -> None:
    reefine.model.script("answer", answer("One.\n\nHow to use: ask.", skill("one")))
    first = await reefine.settled(await reefine.train("one"))
    reefine.model.script("answer", answer("Two.\n\nHow to use: ask.", skill("two")))
    await reefine.settled(await reefine.train("two"))
    rolled = await reefine.ok("POST", "/reef/scenarios/harness/rollback", {"release_id": first["release"]})
    assert rolled["version"] == "v3" and rolled["operation"] == "rollback"
    served = await reefine.ok("GET", "/reef/harness")
    assert served["version"] == "v3"
    assert "pi-agent/skills/one/SKILL.md" in served["files"] and "pi-agent/skills/two/SKILL.md" not in served["files"]
    # The rejected and the current version cannot be restored.
    status, body = await reefine.call("POST", "/reef/scenarios/harness/rollback", {"release_id": rolled["release_id"]})
    assert status == 409 and body["error"]["type"] == "already_current"


async def test_restart_keeps_versions_releases_and_progress(start_reefine: StartReefine) -> None:
    reefine = await start_reefine()
    reefine.model.script("answer", answer("Kept.\n\nHow to use: ask.", skill("kept")))
    request_id = await reefine.train("keep this")
    before = await reefine.settled(request_id)
    await reefine.server.close()

    again = await start_reefine()
    after = await again.settled(request_id)
    assert after == before
    assert (await again.ok("GET", "/reef/harness"))["release_id"] == before["release"]
    reefine.model.script("answer", answer("More.\n\nHow to use: ask.", skill("more")))
    assert (await again.settled(await again.train("and more")))["version"] == "v2"


async def test_low_scores_become_one_skill_in_hybrid_mode_only(reefine: Reefine) -> None:
    chat = {"model": "fake-proposer", "messages": [{"role": "user", "content": "capital of France?"}]}
    async with reefine.session.post(reefine.url + "/v1/chat/completions", json=chat, headers=reefine.headers()) as sent:
        receipt = sent.headers["x-reef-agent-record-id"]
    await reefine.ok("POST", "/reef/report", {"score": 0, "references": [receipt]})  # manual: kept, no step
    status = await eventually(
        lambda: reefine.ok("GET", "/reef/status"),
        60,
        "the low score to be judged",
        satisfied=lambda shown: shown["training"]["scenarios"].get("harness", {}).get("ineligible"),
    )
    training = status["training"]["scenarios"]["harness"]
    assert list(training["ineligible"]) == ["manual mode: scores are kept, only change requests start a step"]
    await reefine.ok("POST", "/reef/scenarios/harness/update", {"training_mode": "hybrid"})
    async with reefine.session.post(reefine.url + "/v1/chat/completions", json=chat, headers=reefine.headers()) as sent:
        second = sent.headers["x-reef-agent-record-id"]
    reefine.model.script("failure-skill", json.dumps(skill("answer-fully", "# Answer fully\nGive the reason too.")))
    await reefine.ok("POST", "/reef/report", {"score": 0.1, "references": [second]})
    rows = await eventually(
        reefine.releases, 60, "a release of the low score's skill", satisfied=lambda rows: len(rows) > 1
    )
    assert (rows[0]["version"], rows[0]["result"], rows[0]["request"]) == ("v1", "selected", None)
    assert rows[0]["consumed"][-1] == second
    assert "Trace 1 (score 0.1)" in reefine.model.seen("failure-skill")[0]
    files = (await reefine.ok("GET", "/reef/harness"))["files"]
    assert "pi-agent/skills/answer-fully/SKILL.md" in files
