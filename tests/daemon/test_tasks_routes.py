"""`/reef/scenarios/{s}/tasks` over HTTP: tasks are added, listed, shown and removed; every bad field is refused with
a 400 that names it and nothing stored; replays are the opening turns of the newest low-scored conversations recorded
through the proxy (at most harness.replays of them); promote makes one a protected task and dismiss hides it."""

from __future__ import annotations

import asyncio
import io
import json
import re
from typing import Any

import pytest

from tests.support.processes import children
from tests.support.reef_testing import SCENARIO, Reef, StartReef
from tests.support.waiting import eventually

TASKS = f"/reef/scenarios/{SCENARIO}/tasks"


async def ensure_scenario(reef: Reef) -> None:
    response = await reef.post("/reef/scenarios", {"name": SCENARIO}, scenario=None)
    assert response.status in (200, 201), await response.text()


async def listed(reef: Reef) -> dict[str, Any]:
    response = await reef.get(TASKS)
    assert response.status == 200, await response.text()
    body: dict[str, Any] = await response.json()
    return body


async def error_of(response: Any, status: int) -> dict[str, str]:
    assert response.status == status, await response.text()
    body: dict[str, dict[str, str]] = await response.json()
    return body["error"]


async def conversation(reef: Reef, opening: str, score: float | None, *, turns: int = 1) -> str:
    """A chat through the proxy that opened with `opening` (then `turns - 1` more user turns), scored `score`."""
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are a coding agent."}]
    for turn in range(turns):
        messages += [{"role": "user", "content": opening if turn == 0 else f"and then step {turn}"}]
        messages += [{"role": "assistant", "content": "done"}] if turn < turns - 1 else []
    response = await reef.post("/v1/chat/completions", {"model": "fake-model", "messages": messages})
    assert response.status == 200, await response.text()
    receipt = response.headers["x-reef-agent-record-id"]
    if score is not None:
        report = await reef.post("/reef/report", {"references": [receipt], "score": score})
        assert report.status in (200, 201), await report.text()
    return receipt


async def test_tasks_are_added_listed_shown_and_removed(reef: Reef) -> None:
    await ensure_scenario(reef)
    body = {"prompt": "Add a --verbose flag", "fixture": {"src/cli.py": "import sys\n"}, "regex": r"--verbose"}
    response = await reef.post(TASKS, {**body, "protected": True})
    assert response.status == 201, await response.text()
    task = await response.json()
    assert task["id"].startswith("t-") and task["kind"] == "task" and task["protected"] is True
    assert {key: task[key] for key in body} == body and task["judge"] is None and task["source_record"] is None

    judged = await (await reef.post(TASKS, {"prompt": "Explain the design", "judge": "Is it clear?"})).json()

    assert await listed(reef) == {"scenario": SCENARIO, "tasks": [task, judged], "replays": [], "next_after": None}
    assert await (await reef.get(f"{TASKS}/{task['id']}")).json() == task
    removed = await reef.session.delete(f"{reef.url}{TASKS}/{task['id']}")
    assert removed.status == 200 and await removed.json() == task
    assert (await listed(reef))["tasks"] == [judged]
    error = await error_of(await reef.get(f"{TASKS}/{task['id']}"), 404)
    assert task["id"] in error["message"]
    error = await error_of(await reef.session.delete(f"{reef.url}{TASKS}/{task['id']}"), 404)
    assert error["type"] == "unknown_task"


async def test_an_unknown_scenario_is_a_404_that_names_it(reef: Reef) -> None:
    for response in (
        await reef.get("/reef/scenarios/nowhere/tasks"),
        await reef.post("/reef/scenarios/nowhere/tasks", {"prompt": "hello"}),
        await reef.post("/reef/scenarios/nowhere/tasks/r-0123/promote"),
    ):
        error = await error_of(response, 404)
        assert error["type"] == "unknown_scenario" and "nowhere" in error["message"]


BAD_TASKS: list[tuple[str, dict[str, Any]]] = [
    ("prompt", {}),
    ("prompt", {"prompt": "   "}),
    ("prompt", {"prompt": 42}),
    ("prompt", {"prompt": "x" * 100_001}),
    ("fixture", {"prompt": "p", "fixture": ["a.py"]}),
    ("fixture", {"prompt": "p", "fixture": {"../escape.py": ""}}),
    ("fixture", {"prompt": "p", "fixture": {"src/../../escape.py": ""}}),
    ("fixture", {"prompt": "p", "fixture": {"/etc/passwd": ""}}),
    ("fixture", {"prompt": "p", "fixture": {"C:/windows.txt": ""}}),
    ("fixture", {"prompt": "p", "fixture": {"src\\a.py": ""}}),
    ("fixture", {"prompt": "p", "fixture": {"src//a.py": ""}}),
    ("fixture", {"prompt": "p", "fixture": {"./a.py": ""}}),
    ("fixture", {"prompt": "p", "fixture": {"": "empty name"}}),
    ("fixture", {"prompt": "p", "fixture": {"a\nb.py": ""}}),
    ("fixture", {"prompt": "p", "fixture": {"x" * 256: ""}}),
    ("fixture", {"prompt": "p", "fixture": {"a.py": 7}}),
    ("fixture", {"prompt": "p", "fixture": {"a": "file", "a/b.py": "and folder"}}),
    ("fixture", {"prompt": "p", "fixture": {f"f{n}.txt": "" for n in range(201)}}),
    ("fixture", {"prompt": "p", "fixture": {"a.txt": "x" * 600_000, "b.txt": "y" * 600_000}}),
    ("regex", {"prompt": "p", "regex": "(unclosed"}),
    ("regex", {"prompt": "p", "regex": ""}),
    ("regex", {"prompt": "p", "regex": "a{4294967296}"}),
    ("regex", {"prompt": "p", "regex": "(" * 4000 + ")" * 4000}),
    ("regex", {"prompt": "p", "regex": "((a{1000}){1000}){1000}"}),  # compiling it would take gigabytes
    ("regex", {"prompt": "p", "regex": ["a"]}),
    ("judge", {"prompt": "p", "judge": 3}),
    ("judge", {"prompt": "p", "regex": "ok", "judge": "and also a judge"}),
    ("protected", {"prompt": "p", "protected": "yes"}),
    ("protected", {"prompt": "p", "protected": 1}),
    ("check", {"prompt": "p", "check": "unknown field"}),
]


@pytest.mark.parametrize(("field", "body"), BAD_TASKS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_TASKS)])
async def test_bad_input_is_refused_with_the_field_named_and_nothing_stored(
    reef: Reef, field: str, body: dict[str, Any]
) -> None:
    await ensure_scenario(reef)
    sent = io.BytesIO(json.dumps(body).encode())  # some bodies are over a MiB: not held as one bytes object
    response = await reef.session.post(f"{reef.url}{TASKS}", data=sent, headers={"content-type": "application/json"})
    error = await error_of(response, 400)
    assert error["type"] == "invalid_task"
    assert error["message"].startswith(f"{field}: ")
    assert (await listed(reef))["tasks"] == []


LONE_SURROGATES = [
    ("regex", {"prompt": "p", "regex": "\udc00"}),
    ("judge", {"prompt": "p", "judge": "\udfff?"}),
    ("fixture", {"prompt": "p", "fixture": {"a.txt": "\ud800"}}),
    ("fixture", {"prompt": "p", "fixture": {"\ud800.txt": ""}}),
]


@pytest.mark.parametrize(("field", "body"), LONE_SURROGATES)
async def test_text_holding_a_lone_surrogate_is_refused_with_the_field_named(
    reef: Reef, field: str, body: dict[str, Any]
) -> None:
    await ensure_scenario(reef)
    response = await reef.post(TASKS, body)
    error = await error_of(response, 400)
    assert error["message"].startswith(field) and "lone surrogate" in error["message"]
    assert (await listed(reef))["tasks"] == []


async def test_a_body_that_is_not_a_json_object_is_refused(reef: Reef) -> None:
    await ensure_scenario(reef)
    for data in (b"", b"[1]", b"{not json"):
        error = await error_of(await reef.post(TASKS, data=data), 400)
        assert error["type"] == "invalid_json"
    assert (await listed(reef))["tasks"] == []


async def test_replays_are_the_newest_low_scored_openings_up_to_the_setting(start_reef: StartReef) -> None:
    reef = await start_reef(harness__replays="2")
    oldest = await conversation(reef, "Rename the helper", 0.0)
    await conversation(reef, "Write the docs", 1.0)  # scored well: not replayed
    await conversation(reef, "Never scored", None)
    await conversation(reef, "Fix the failing test", 0.2, turns=3)  # its opening is replayed, not its last turn
    newest = await conversation(reef, "Fix the failing test", 0.1)  # the same opening again: one replay
    imported = await reef.post(
        "/reef/records/batch",
        {"records": [{"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}],
                      "score": 0.0}]},
    )  # fmt: skip
    assert (await imported.json())["imported"] == 1  # a low-scored record with no user turn: nothing to replay

    replays = (await listed(reef))["replays"]

    assert [r["prompt"] for r in replays] == ["Fix the failing test", "Rename the helper"]
    assert replays[1] == {
        "id": f"r-{oldest}", "scenario": SCENARIO, "kind": "replay", "prompt": "Rename the helper", "fixture": {},
        "regex": None, "judge": None, "protected": False, "source_record": oldest,
        "created_at": replays[1]["created_at"],
    }  # fmt: skip
    assert replays[0]["source_record"] == newest  # the newest conversation that opened so
    assert await (await reef.get(f"{TASKS}/r-{oldest}")).json() == replays[1]

    none = await start_reef(harness__replays="0")
    assert (await listed(none))["replays"] == []


async def test_promote_turns_a_replay_into_a_protected_task(reef: Reef) -> None:
    receipt = await conversation(reef, "Make the build pass", 0.0)
    replay_id = f"r-{receipt}"

    response = await reef.post(f"{TASKS}/{replay_id}/promote")

    assert response.status == 201, await response.text()
    task = await response.json()
    assert task["kind"] == "task" and task["protected"] is True and task["id"].startswith("t-")
    assert task["prompt"] == "Make the build pass" and task["source_record"] == receipt
    assert await listed(reef) == {"scenario": SCENARIO, "tasks": [task], "replays": [], "next_after": None}
    error = await error_of(await reef.post(f"{TASKS}/{replay_id}/promote"), 409)
    assert "already promoted" in error["message"]
    error = await error_of(await reef.post(f"{TASKS}/{task['id']}/promote"), 400)
    assert error["type"] == "not_a_replay"


async def test_dismiss_hides_a_replay(reef: Reef) -> None:
    dismissed = await conversation(reef, "Not worth it", 0.0)
    kept = await conversation(reef, "Worth replaying", 0.0)

    response = await reef.post(f"{TASKS}/r-{dismissed}/dismiss")

    assert response.status == 200, await response.text()
    assert await response.json() == {"scenario": SCENARIO, "id": f"r-{dismissed}", "dismissed": True}
    assert [r["id"] for r in (await listed(reef))["replays"]] == [f"r-{kept}"]
    assert (await listed(reef))["tasks"] == []
    error = await error_of(await reef.post(f"{TASKS}/r-{'0' * 32}/dismiss"), 404)
    assert error["type"] == "unknown_task"


async def test_a_regex_whose_flags_hide_its_size_is_refused_while_healthz_keeps_answering(reef: Reef) -> None:
    await ensure_scenario(reef)
    adding = asyncio.create_task(reef.post(TASKS, {"prompt": "p", "regex": "(?x)(a {3000}) {1000}"}))
    await eventually(
        lambda: any(b"\x00-I\x00-c\x00" in argv for argv in children().values()), 30, "the regex being compiled"
    )
    health = await reef.get("/healthz")
    assert health.status == 200
    assert not adding.done()  # /healthz answered while the regex was being compiled
    error = await error_of(await adding, 400)
    # Memory runs out first on a quiet machine; on a busy one the CPU bound may come first. Either refuses it.
    refused = re.match(
        r"regex: (needs more than 128 MiB|takes more than 1 s of CPU or more than 128 MiB) to compile", error["message"]
    )
    assert refused is not None, error["message"]
    assert "harness.regex-compile-" in error["message"]
    assert (await listed(reef))["tasks"] == []


async def test_a_fixture_name_longer_than_a_file_system_takes_is_refused(reef: Reef) -> None:
    await ensure_scenario(reef)
    error = await error_of(await reef.post(TASKS, {"prompt": "p", "fixture": {"é" * 200: "x"}}), 400)
    assert error["message"].startswith("fixture: the path 'ééé")
    assert error["message"].endswith("has a name over 255 bytes (as UTF-8)")
    accepted = await reef.post(TASKS, {"prompt": "p", "fixture": {"src/" + "é" * 126 + ".py": "x"}})
    assert accepted.status == 201, await accepted.text()


async def test_a_scenario_holds_at_most_the_settings_tasks_and_fixture_text(start_reef: StartReef) -> None:
    reef = await start_reef(harness__max_tasks="2", harness__max_task_fixture_chars="1000")
    await ensure_scenario(reef)
    first = await reef.post(TASKS, {"prompt": "one", "fixture": {"a.txt": "x" * 900}})
    assert first.status == 201, await first.text()
    error = await error_of(await reef.post(TASKS, {"prompt": "two", "fixture": {"b.txt": "y" * 200}}), 409)
    assert error["type"] == "too_many_tasks" and "harness.max-task-fixture-chars" in error["message"]
    assert (await reef.post(TASKS, {"prompt": "two"})).status == 201
    error = await error_of(await reef.post(TASKS, {"prompt": "three"}), 409)
    assert error["message"] == (
        f"scenario '{SCENARIO}' already holds 2 tasks, the most it may (the setting harness.max-tasks); "
        "remove one first"
    )
    assert [task["prompt"] for task in (await listed(reef))["tasks"]] == ["one", "two"]


async def test_the_task_list_comes_in_pages(reef: Reef) -> None:
    await ensure_scenario(reef)
    ids = []
    for prompt in ("one", "two", "three"):
        response = await reef.post(TASKS, {"prompt": prompt})
        ids.append((await response.json())["id"])
    first = await (await reef.get(TASKS, params={"limit": "2"})).json()
    assert [task["id"] for task in first["tasks"]] == ids[:2] and first["next_after"] == ids[1]
    last = await (await reef.get(TASKS, params={"limit": "2", "after": first["next_after"]})).json()
    assert [task["id"] for task in last["tasks"]] == ids[2:] and last["next_after"] is None
    for limit in ("0", "201", "x", "-1"):
        error = await error_of(await reef.get(TASKS, params={"limit": limit}), 400)
        assert error["message"] == "limit must be a whole number from 1 to 200"
    error = await error_of(await reef.get(TASKS, params={"after": "t-nothing"}), 404)
    assert "t-nothing" in error["message"]
