"""A standing fuzz test of every JSON route: random, deep and huge bodies, numbers out of range, odd headers and
queries, odd task ids, and the step tools a proposer run is served. Whatever arrives, reef answers without a 5xx,
and a request it refuses stores nothing.

The daemon runs on its own event loop in a thread so that hypothesis can drive it with a plain HTTP client.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import string
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters import get_adapter
from recipes.reefine.step_tools import StepTools
from recipes.reefine.workspace import lay_out, make_writable
from reef_daemon.app import create_app
from reef_daemon.settings import load_settings
from tests.support.fake_upstream import FakeUpstream

TASKED = "tasked"  # a scenario that exists, so its task routes get past the 404
STEP_TOKEN = "fuzz-step-token"
INFERENCE = ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens"]
JSON_ROUTES = [
    *INFERENCE,
    "/reef/report",
    "/reef/scenarios",
    "/reef/scenarios/demo/update",
    "/reef/scenarios/demo/promote",
    "/reef/scenarios/demo/rollback",
    "/reef/train",
    "/reef/requests",
    "/reef/judge/group",
    "/reef/scenarios/demo/tasks",
    "/reef/scenarios/demo/canary",
    f"/reef/scenarios/{TASKED}/tasks",
    f"/reef/scenarios/{TASKED}/tasks/r-0190/promote",
    f"/reef/scenarios/{TASKED}/tasks/r-0190/dismiss",
    "/reef/records/batch",
]
# 5xx answers that are the meaning of a route, not a failure: a recipe without releases or a harness says so.
DESIGNED_5XX = {"no_releases", "no_harness"}
FUZZ = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


@dataclass
class ThreadedReef:
    """A reef app and its fake upstream, served from an event loop on another thread."""

    url: str
    database: Path
    client: httpx.Client
    step_url: str  # the step tools of one proposer run (without a trial agent)

    def counts(self) -> tuple[int, int, int, int, int]:
        """Records, scenarios, stored events, tasks and canaries: what a refused request must not add to."""
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True) as conn:
            records = conn.execute("SELECT count(*) FROM records").fetchone()[0]
            scenarios = conn.execute("SELECT count(*) FROM scenarios").fetchone()[0]
            events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
            tasks = conn.execute("SELECT count(*) FROM eval_tasks").fetchone()[0]
            canaries = conn.execute("SELECT count(*) FROM canaries").fetchone()[0]
        return int(records), int(scenarios), int(events), int(tasks), int(canaries)

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        before = self.counts()
        response = self.client.request(method, self.url + path, **kwargs)
        assert response.status_code < 500 or _error_type(response) in DESIGNED_5XX, (
            method,
            path,
            response.status_code,
            response.text[:500],
        )
        if response.status_code >= 400:
            assert self.counts() == before, (path, response.status_code, response.text[:200])
        return response


def _error_type(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["type"])
    except (ValueError, KeyError, TypeError):
        return ""


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedReef]:
    state = tmp_path_factory.mktemp("fuzz") / "state"
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzzed-reef", daemon=True)
    thread.start()

    async def start() -> tuple[TestServer, TestServer]:
        upstream = TestServer(FakeUpstream().app(), host="127.0.0.1")
        await upstream.start_server()
        overrides = {
            "inference.upstream-url": str(upstream.make_url("")).rstrip("/"),
            "reef.state-dir": str(state),
            "reef.max-body-mb": "1",
        }
        server = TestServer(create_app(load_settings(overrides=overrides, environ={})), host="127.0.0.1")
        await server.start_server()
        return upstream, server

    async def start_step_tools() -> TestServer:
        pi = get_adapter("pi")
        lay_out(workspace, [], pi, "make answers brief", [], "# Your job\n")
        tools = StepTools(pi, [], workspace, (3, 30.0, time.time() + 600), None, "no agent here", STEP_TOKEN)
        app = web.Application()
        app.router.add_routes(tools.routes())
        served = TestServer(app, host="127.0.0.1")
        await served.start_server()
        return served

    workspace = tmp_path_factory.mktemp("fuzz-step") / "workspace"
    upstream, server = asyncio.run_coroutine_threadsafe(start(), loop).result(60)
    steps = asyncio.run_coroutine_threadsafe(start_step_tools(), loop).result(60)
    url = str(server.make_url("")).rstrip("/")
    with httpx.Client(timeout=30) as client:
        assert client.post(f"{url}/reef/scenarios", json={"name": TASKED}).status_code in (200, 201)
        yield ThreadedReef(url, state / "reef.sqlite3", client, str(steps.make_url("")).rstrip("/"))

    async def stop() -> None:
        await steps.close()
        await server.close()
        await upstream.close()

    asyncio.run_coroutine_threadsafe(stop(), loop).result(60)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()
    make_writable(workspace)


HEADER_TEXT = st.text(alphabet=string.printable.strip("\t\n\r\x0b\x0c"), max_size=200).map(str.strip)
SCENARIOS = st.one_of(st.just("demo"), st.just("s" * 128), st.just("s" * 129), HEADER_TEXT)
NUMBERS = st.one_of(
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["1e400", "-1e400", "1e-400", "9" * 400, "-0", "2e308"]).map(json.loads),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=50))
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=20), children, max_size=5)
    ),
    max_leaves=30,
)
KNOWN_KEYS = [
    "model", "messages", "stream", "input", "max_tokens", "score", "feedback", "references", "metadata",
    "agent_record_id", "name", "training_mode", "release_id", "text", "session", "client",
    "prompt", "fixture", "regex", "judge", "protected", "share", "records",
]  # fmt: skip
OBJECTS = st.dictionaries(st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=20)), VALUES, max_size=8)


def _encode(value: Any) -> bytes:
    # Python writes out-of-range floats as Infinity, which is not JSON; the raw bodies below send 1e400 as text.
    return json.dumps(value, allow_nan=True).encode()


RAW_BODIES = st.one_of(
    st.binary(max_size=300),
    st.integers(min_value=1, max_value=200_000).map(lambda depth: b"[" * depth),
    st.integers(min_value=1, max_value=50_000).map(lambda depth: b'{"a":' * depth + b"1" + b"}" * depth),
    st.integers(min_value=1, max_value=3).map(lambda mib: b'{"text": "' + b"x" * (mib * 700_000) + b'"}'),
    st.sampled_from([b'{"score": 1e400, "feedback": "x"}', b'{"score": -1e999}', b'{"score": NaN}', b"{}", b"null"]),
)


@FUZZ
@given(path=st.sampled_from(JSON_ROUTES), body=OBJECTS, scenario=SCENARIOS)
def test_random_json_objects(fuzzed: ThreadedReef, path: str, body: dict[str, Any], scenario: str) -> None:
    fuzzed.send("POST", path, content=_encode(body), headers={"x-reef-scenario": scenario})


@FUZZ
@given(path=st.sampled_from(JSON_ROUTES), body=RAW_BODIES, content_type=HEADER_TEXT)
def test_raw_deep_and_huge_bodies(fuzzed: ThreadedReef, path: str, body: bytes, content_type: str) -> None:
    headers = {"x-reef-scenario": "demo", "content-type": content_type or "application/json"}
    fuzzed.send("POST", path, content=body, headers=headers)


@FUZZ
@given(
    path=st.sampled_from(JSON_ROUTES),
    names=st.lists(st.text(alphabet=string.ascii_letters + "-", min_size=1, max_size=40), max_size=4),
    values=st.lists(HEADER_TEXT, min_size=4, max_size=4),
)
def test_odd_headers(fuzzed: ThreadedReef, path: str, names: list[str], values: list[str]) -> None:
    headers = {"x-reef-scenario": values[0], "x-reef-tag-" + (names[0] if names else "t"): values[1]}
    headers.update({name: value for name, value in zip(names[1:], values[2:], strict=False)})
    headers["authorization"] = values[3]
    fuzzed.send("POST", path, json={"model": "m", "score": 1}, headers=headers)


@FUZZ
@given(
    scenario=SCENARIOS,
    after=st.one_of(HEADER_TEXT, NUMBERS.map(str)),
    limit=st.one_of(HEADER_TEXT, NUMBERS.map(str)),
)
def test_odd_queries(fuzzed: ThreadedReef, scenario: str, after: str, limit: str) -> None:
    fuzzed.send("GET", "/reef/records", params={"scenario": scenario, "after": after, "limit": limit})
    with fuzzed.client.stream(
        "GET", fuzzed.url + "/reef/events", params={"scenario": scenario}, headers={"Last-Event-ID": after}
    ) as events:
        assert events.status_code < 500


LIVE_ROUTES = ["/reef/scenarios/{}/canary", "/reef/scenarios/{}/versions/scores"]


@FUZZ
@given(
    method=st.sampled_from(["GET", "POST", "DELETE"]),
    route=st.sampled_from(LIVE_ROUTES),
    scenario=st.one_of(SCENARIOS, st.just("demo.archived-20260101T000000Z-000")),
    body=st.one_of(OBJECTS, st.fixed_dictionaries({"release_id": HEADER_TEXT, "share": NUMBERS})),
)
def test_the_canary_routes(fuzzed: ThreadedReef, method: str, route: str, scenario: str, body: dict[str, Any]) -> None:
    """Any method, scenario (odd, unknown or archived) and canary body: an answer, never a 5xx."""
    path = route.format(quote(scenario, safe="") or "demo")
    fuzzed.send(method, path, content=_encode(body) if method == "POST" else None)


@FUZZ
@given(
    after=st.one_of(HEADER_TEXT, NUMBERS.map(str)),
    limit=st.one_of(HEADER_TEXT, NUMBERS.map(str)),
    task=HEADER_TEXT,
)
def test_odd_task_queries_and_ids(fuzzed: ThreadedReef, after: str, limit: str, task: str) -> None:
    tasks = f"/reef/scenarios/{TASKED}/tasks"
    fuzzed.send("GET", tasks, params={"after": after, "limit": limit})
    shown = quote(task, safe="") or "t-"
    for method, path in (("GET", shown), ("DELETE", shown), ("POST", f"{shown}/promote"), ("POST", f"{shown}/dismiss")):
        fuzzed.send(method, f"{tasks}/{path}")


STEP_TOOLS = ["check", "trial", "notes", "nothing"]
STEP_VALUES = st.one_of(VALUES, st.text(max_size=300), st.sampled_from(["(?x)(a {3000}) {1000}", "(a|a)+$", "("]))
STEP_BODIES = st.one_of(
    RAW_BODIES,
    st.dictionaries(st.sampled_from(["prompt", "expect", "workspace", "text"]), STEP_VALUES, max_size=4).map(_encode),
)


@FUZZ
@given(tool=st.sampled_from(STEP_TOOLS), body=STEP_BODIES)
def test_the_step_tools_answer_whatever_arrives(fuzzed: ThreadedReef, tool: str, body: bytes) -> None:
    response = fuzzed.client.post(
        f"{fuzzed.step_url}/reef-step/{tool}", content=body, headers={"Authorization": f"Bearer {STEP_TOKEN}"}
    )
    assert response.status_code < 500, (tool, body[:200], response.text[:500])
    if response.status_code != 413:  # aiohttp's own answer to a body over its 1 MiB
        assert set(response.json()) == {"output", "code"}, response.text[:500]


@FUZZ
@given(
    scenario=SCENARIOS,
    format=st.one_of(st.sampled_from(["openai", "preference", "tokens"]), HEADER_TEXT),
    min_score=st.one_of(HEADER_TEXT, NUMBERS.map(str)),
    since=st.one_of(HEADER_TEXT, NUMBERS.map(str), st.sampled_from(["nan", "inf", "-inf", "2026-01-31"])),
    include_cut=st.one_of(st.sampled_from(["true", "false"]), HEADER_TEXT),
)
def test_odd_export_queries(
    fuzzed: ThreadedReef, scenario: str, format: str, min_score: str, since: str, include_cut: str
) -> None:
    params = {"scenario": scenario, "format": format, "min_score": min_score, "since": since,
              "include_cut": include_cut}  # fmt: skip
    response = fuzzed.send("GET", "/reef/export", params=params)  # read whole: a cut body would raise here
    if response.status_code == 200:
        assert all(json.loads(line) for line in response.text.splitlines())


@FUZZ
@given(conversations=st.lists(st.one_of(OBJECTS, VALUES), max_size=5), scenario=SCENARIOS)
def test_random_import_batches(fuzzed: ThreadedReef, conversations: list[Any], scenario: str) -> None:
    response = fuzzed.send("POST", "/reef/records/batch", content=_encode({"records": conversations}),
                           headers={"x-reef-scenario": scenario})  # fmt: skip
    if response.status_code == 200:
        assert len(response.json()["results"]) == len(conversations)
        fuzzed.send("GET", "/reef/export", params={"scenario": response.json()["scenario"]})
