"""`reef score`: by argument, from JSON lines (exit codes, messages, idempotent reruns), and `--next` on stdin."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
from typer.testing import Result

from tests.support.cli_testing import Daemon

Cli = Callable[..., Result]


def test_score_by_argument_takes_the_scenario_from_the_records(daemon: Daemon, cli: Cli) -> None:
    first, second = daemon.chat("by-arg"), daemon.chat("by-arg")
    result = cli("score", first, second, "0.25", "--feedback", "both missed the point")
    assert result.exit_code == 0, result.output
    assert "scored 2 records in by-arg: 0.25" in result.stdout and "replaces" not in result.stdout
    for receipt in (first, second):
        record = daemon.record(receipt)
        assert record["score"] == 0.25
        assert record["reports"][0]["feedback"] == "both missed the point"

    ack = json.loads(cli("score", first, "1", "--json").stdout)
    assert ack["scenario"] == "by-arg" and ack["request_type"] == "report"
    assert daemon.record(first)["score"] == 1
    again = cli("score", first, "0.5")
    assert again.exit_code == 0 and f"{first} had a score of 1; this one replaces it" in again.stdout


def test_score_refuses_bad_usage_with_status_2(daemon: Daemon, cli: Cli) -> None:
    receipt = daemon.chat("usage")
    for args in ([], ["1"], [receipt, "high"], [receipt, "nan"], [receipt, "1", "--bogus"]):
        result = cli("score", *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert cli("score", receipt, "1", "--from", "-").exit_code == 2
    assert cli("score", "--from", "/nonexistent/scores.jsonl").exit_code == 2
    assert daemon.record(receipt)["reports"] == []


def test_score_refuses_receipts_of_two_scenarios_and_unknown_ones(daemon: Daemon, cli: Cli) -> None:
    one, other = daemon.chat("mix-a"), daemon.chat("mix-b")
    mixed = cli("score", one, other, "1")
    assert mixed.exit_code == 1 and "different scenarios" in mixed.stderr
    unknown = cli("score", "0" * 32, "1")
    assert unknown.exit_code == 1 and "no record" in unknown.stderr


def test_score_from_lines_reports_each_refused_line_and_reruns_change_nothing(
    daemon: Daemon, cli: Cli, tmp_path: Path
) -> None:
    good, other = daemon.chat("ci"), daemon.chat("ci")
    lines = [
        json.dumps({"receipt": good, "score": 1, "feedback": "tests pass", "id": "build-7-good"}),
        json.dumps({"receipt": good, "score": "0.8"}),
        "{not json",
        "",
        json.dumps({"references": [other], "score": 0, "metadata": {"job": 7}}),
        json.dumps({"receipt": "0" * 32, "score": 1}),
        json.dumps({"receipt": other, "grade": 1}),
        json.dumps({"receipt": other, "score": 0, "id": "build-7-good"}),
    ]
    scores = tmp_path / "scores.jsonl"
    scores.write_text("\n".join(lines) + "\n")

    first = cli("score", "--from", str(scores))
    assert first.exit_code == 1
    refused = first.stderr.splitlines()
    assert [line.split(":")[1].strip() for line in refused[:-1]] == ["line 2", "line 3", "line 6", "line 7", "line 8"]
    assert "score must be a number, not text: write 0.8 without quotes" in refused[0]
    assert "not a stored record" in refused[2]
    assert "unknown field grade" in refused[3]
    assert "build-7-good" in refused[4] and "record_conflict" in refused[4]
    assert refused[-1] == "2 lines accepted, 5 refused"
    reports = daemon.reports("ci")
    assert len(reports) == 2
    assert daemon.record(good)["score"] == 1 and daemon.record(other)["score"] == 0

    rerun = cli("score", "--from", "-", "--json", input=scores.read_text())
    assert rerun.exit_code == 1
    results = [json.loads(line) for line in rerun.stdout.splitlines()]
    assert [result["line"] for result in results] == [1, 2, 3, 5, 6, 7, 8]
    assert [result["ok"] for result in results] == [True, False, False, True, False, False, False]
    assert results[0]["id"] == "build-7-good"
    assert len(daemon.reports("ci")) == 2  # nothing stored twice

    clean = cli("score", "--from", "-", input=lines[0] + "\n" + lines[4] + "\n")
    assert clean.exit_code == 0, clean.output
    assert len(daemon.reports("ci")) == 2


def test_score_next_walks_unscored_records_from_stdin(daemon: Daemon) -> None:
    receipts = [daemon.chat("walk", question=f"question {n}") for n in range(3)]
    # A word that is not a score is asked again; Enter skips the second record; q quits at the third.
    walked = daemon.reef("score", "--next", "--scenario", "walk", input="great\n0.5\nconcise and right\n\nq\n")
    assert walked.returncode == 0, walked.stderr
    assert "question 0" in walked.stdout and "question 2" in walked.stdout
    assert "is not a number" in walked.stdout
    assert "reef score" not in walked.stdout  # the prompt asks for the score; no command to type instead
    assert "stopped (scored 1, skipped 1)" in walked.stdout
    first = daemon.record(receipts[0])
    assert first["score"] == 0.5 and first["reports"][0]["feedback"] == "concise and right"
    assert daemon.record(receipts[1])["score"] is None
    assert daemon.record(receipts[2])["score"] is None

    # A score outside the scale is asked again, naming the scale.
    finished = daemon.reef("score", "--next", "--scenario", "walk", input="1\n\n-1\n0\n\n")
    assert finished.returncode == 0, finished.stderr
    assert "-1 is outside the scale; type a score from 0 to 1" in finished.stdout
    assert "no more unscored records (scored 2, skipped 0)" in finished.stdout
    assert [daemon.record(r)["score"] for r in receipts] == [0.5, 1, 0]


def test_scores_outside_the_scale_are_refused_everywhere_with_the_scale_named(daemon: Daemon, cli: Cli) -> None:
    receipt = daemon.chat("scale")
    assert daemon.get("/reef/status")["score_scale"] == {"min": 0.0, "max": 1.0}
    for value in ("7", "-1"):
        refused = cli("score", receipt, value)
        assert refused.exit_code == 1, refused.output
        assert "outside this deployment's scale: from 0 (worst) to 1 (best)" in refused.stderr
    lines = json.dumps({"receipt": receipt, "score": 7}) + "\n" + json.dumps({"receipt": receipt, "score": 0.25})
    mixed = cli("score", "--from", "-", input=lines + "\n")
    assert mixed.exit_code == 1
    assert "line 1: score 7 is outside this deployment's scale" in mixed.stderr
    answer = httpx.post(
        f"{daemon.url}/reef/report", json={"score": 1.5, "references": [receipt]}, headers={"x-reef-scenario": "scale"}
    )
    assert answer.status_code == 400 and "from 0 (worst) to 1 (best)" in answer.json()["error"]["message"]
    assert [report["score"] for report in daemon.reports("scale")] == [0.25]
