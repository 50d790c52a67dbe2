"""The user's words: the rules that read a next message as low, high or unclear, measured against a labelled set of
next messages as coding-agent users write them (tests/daemon/data/next_messages.jsonl, labelled by hand), and the
cases where negation, contrast, questions and pasted code decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reef_daemon.reports.words import MAX_CHARS, read_words

LABELLED = Path(__file__).parent / "data" / "next_messages.jsonl"
PRECISION_GOAL = 0.95
COVERAGE_FLOOR = 0.5  # rules that label almost nothing would be precise and useless


def labelled_messages() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(row["message"], row["label"]) for row in rows]


def test_the_rules_are_precise_on_the_messages_they_label() -> None:
    messages = labelled_messages()
    assert len(messages) >= 200 and {label for _, label in messages} == {"low", "high", "unclear"}
    read = [(reading.score if (reading := read_words(text)) else None, label) for text, label in messages]
    labelled = [(score, label) for score, label in read if score is not None]
    right = sum(score == label for score, label in labelled)
    precision, coverage = right / len(labelled), len(labelled) / len(messages)
    wrong = [text for (text, label), (score, _) in zip(messages, read, strict=True) if score not in (None, label)]
    print(f"words: precision {precision:.3f} ({right}/{len(labelled)}), coverage {coverage:.3f} of {len(messages)}")
    assert precision >= PRECISION_GOAL, f"precision {precision:.3f}; read wrongly: {wrong}"
    assert coverage >= COVERAGE_FLOOR


@pytest.mark.parametrize(
    ("message", "score", "phrase"),
    [
        ("No, that is wrong", "low", "no"),
        ("Thanks, that works", "high", "that works"),
        ("thanks, but it still fails", "low", "still fails"),
        ("great, now nothing works", "low", "nothing works"),
        ("works, but the other test fails now", "low", "test fails"),
        ("not bad", "high", "not bad"),
        ("no problem, thanks", "high", "thanks"),
        ("nothing wrong with it, thanks", "high", "thanks"),
        ("it doesn't fail anymore", "high", "does not fail anymore"),
        ("why does it still fail?", "low", "still fail"),
        ("dosent work", "low", "does not work"),
        ("NOOO", "low", "no"),
        ("revert that, you broke the login flow", "low", "revert that"),
        ("error is gone now, thanks", "high", "error is gone"),  # prose that opens like a log line
        ("at least it compiles now", "high", "it compiles"),
        ("Failed again. Same error", "low", "same error"),
        ("thanks for nothing", "low", "thanks for nothing"),
        ("nice try but no", "low", "nice try"),
        ("works fine", "high", "works fine"),
    ],
)
def test_negation_contrast_and_spelling_decide_as_a_person_reads_them(message: str, score: str, phrase: str) -> None:
    reading = read_words(message)
    assert reading is not None and (reading.score, reading.phrase) == (score, phrase)


@pytest.mark.parametrize(
    "message",
    [
        "it works on linux, fails on mac",  # about two things, one each way
        "it works fine on linux but not on mac",
        "perfect, it fixed the crash. the other test fails",  # both, and no "but" says which counts
        "does it work now?",
        "is it still broken or did you fix it?",  # a question that is not a complaint
        "if it still fails, revert it",
        "make sure it works on windows too",
        "how do I undo a commit in git?",
        "we need an undo button in the toolbar",
        "No module named 'yaml'",
        "no tests for this?",
        "great question, the docs are unclear on that",
        "thanks in advance",
        "ok",
        "add a --dry-run flag",
        "",
    ],
)
def test_what_the_rules_cannot_tell_is_left_open(message: str) -> None:
    assert read_words(message) is None


def test_code_logs_and_tracebacks_are_not_the_users_words() -> None:
    fenced = "```\nassert still_fails() == 'no'\n# thanks, works\n```"
    pasted = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: wrong value, still fails'
    assert read_words(fenced) is None and read_words(pasted) is None
    assert read_words("`revert` is the command you want") is None
    assert read_words(f"{fenced}\nperfect, thanks") == read_words("perfect, thanks")


def test_only_the_opening_of_a_long_message_is_read() -> None:
    assert read_words("please add a changelog entry. " * (MAX_CHARS // 20) + "that's wrong") is None
    assert read_words("that's wrong. " + "please add a changelog entry. " * 1000) is not None
