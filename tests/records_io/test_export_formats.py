"""What each export format takes: `preference` pairs only records of the same prompt with different scores,
`tokens` only records that carry token data, and the filters (min score, since) hold for every format."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import datasets

from reef_contract import CHAT_ROUTE
from reef_daemon.ids import new_record_id
from reef_daemon.records import InferenceDraft
from tests.support.records_io_testing import InProcessReef, conversation


async def test_preference_pairs_only_records_with_the_same_prompt(reef: InProcessReef) -> None:
    await reef.import_batch("pref", [
        conversation("A?", "good A", score=1.0),
        conversation("B?", "only B", score=0.0),  # alone: no pair, even with a lower score than A's best
        conversation("A?", "bad A", score=0.0),
        conversation("A?", "middling A", score=0.5),
        conversation("C?", "C one", score=0.5),
        conversation("C?", "C two", score=0.5),  # same score: no preference
        conversation("D?", "D one"),
        conversation("D?", "D two"),  # unscored
    ])  # fmt: skip
    pairs = await reef.export("pref", format="preference")
    assert pairs == [
        {
            "prompt": [{"role": "user", "content": "A?"}],
            "chosen": [{"role": "assistant", "content": "good A"}],
            "rejected": [{"role": "assistant", "content": "bad A"}],
            "score_chosen": 1.0,
            "score_rejected": 0.0,
        }
    ]


async def test_min_score_and_since_filter_the_export(reef: InProcessReef) -> None:
    old = time.mktime((2020, 1, 1, 0, 0, 0, 0, 0, 0))
    await reef.import_batch("filters", [
        conversation("old", "x", score=1.0, created_at=old),
        conversation("new high", "x", score=0.9),
        conversation("new low", "x", score=0.1),
        conversation("new unscored", "x"),
    ])  # fmt: skip
    asked = lambda lines: [line["messages"][0]["content"] for line in lines]  # noqa: E731
    assert asked(await reef.export("filters")) == ["old", "new high", "new low", "new unscored"]
    assert asked(await reef.export("filters", min_score="0.5")) == ["old", "new high"]
    assert asked(await reef.export("filters", min_score="0.5", since="2025-01-01")) == ["new high"]
    assert await reef.export("filters", format="tokens") == []  # imported records carry no tokens


async def test_tokens_exports_only_records_with_token_data(reef: InProcessReef) -> None:
    await reef.import_batch("tok", [conversation("imported", "no tokens", score=1.0)])
    tokens = {"prompt_ids": [1, 2, 3], "output_ids": [4, 5], "logprobs": [-0.1, -0.2], "versions": ["w:1", "w:1"]}
    sampled = await append_exchange(reef, "tok", tokens)
    await append_exchange(reef, "tok", None)  # an upstream exchange: no token data
    response = await reef.client.post(
        "/reef/report", json={"score": 0.75, "references": [sampled]}, headers={"x-reef-scenario": "tok"}
    )
    assert response.status_code == 200, response.text
    assert await reef.export("tok", format="tokens") == [
        {"id": sampled, "prompt_ids": [1, 2, 3], "output_ids": [4, 5], "logprobs": [-0.1, -0.2],
         "versions": ["w:1", "w:1"], "reward": 0.75}
    ]  # fmt: skip
    assert len(await reef.export("tok")) == 3  # openai takes every answered exchange


async def append_exchange(reef: InProcessReef, scenario: str, tokens: dict[str, Any] | None) -> str:
    """An exchange stored as the proxy stores one (with the embedded model's token data, or none)."""
    await reef.daemon.ensure_scenario(scenario)
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    response = {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"},
                                           "finish_reason": "stop"}]}  # fmt: skip
    draft = InferenceDraft(
        id=new_record_id(), scenario=scenario, route=CHAT_ROUTE, created_at=time.time(), model="m",
        request=json.dumps(request).encode(), status=200, response=json.dumps(response).encode(), stream=False,
        complete=True, error=None, ttft_ms=1.0, duration_ms=2.0, overhead_ms=0.1, tokens=tokens,
    )  # fmt: skip
    row = await reef.daemon.store.records.append_inference(draft)
    return row["id"]


async def test_an_export_loads_with_datasets(reef: InProcessReef, tmp_path: Path) -> None:
    await reef.import_batch("ds", [conversation(f"q{i}", f"a{i}", score=i / 10) for i in range(10)])
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in await reef.export("ds")))
    table = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))
    assert table.num_rows == 10 and table[3]["messages"][1]["content"] == "a3"
