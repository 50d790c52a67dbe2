"""What the gate reads from the model is untrusted: the behaviour check a plan writes, and the judge's answers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from recipes.reefine.behaviour import plan_check
from recipes.reefine.judge import pairwise, ranked, regex_verdict
from recipes.reefine.model import ModelFailed, ServedModel
from reef_contract import EvalTask

CATASTROPHIC = "(a|a)+$"  # backtracks 2**n ways on n a's and then a b


def test_a_plan_check_with_a_regex_and_files_is_read() -> None:
    text = json.dumps(
        {"steps": [], "check": {"prompt": " Say hi ", "regex": "h(i|ello)", "files": {"src/a.py": "x = 1\n"}}}
    )
    checked = plan_check(f"Here is the plan:\n```json\n{text}\n```", "the plan")
    assert checked.problem is None and checked.check is not None
    assert (checked.check.prompt, checked.check.regex, checked.check.judge) == ("Say hi", "h(i|ello)", None)
    assert checked.check.fixture == {"src/a.py": "x = 1\n"}


@pytest.mark.parametrize(
    ("check", "problem"),
    [
        (None, "the plan held no behaviour check"),
        ("prose, no JSON", "the plan held no valid JSON"),
        ({"steps": []}, 'the plan held no "check" object'),
        ([{"step": "a"}], 'the plan held no "check" object'),
        ({"check": ["p"]}, "the plan: the behaviour check must be one object"),
        ({"check": {"prompt": "", "regex": "x"}}, 'the plan: the behaviour check needs a "prompt" of 1 to 2000'),
        ({"check": {"prompt": "p"}}, 'the plan: the behaviour check needs exactly one of "regex" and "judge"'),
        ({"check": {"prompt": "p", "regex": "x", "judge": "y"}}, "the plan: the behaviour check needs exactly one"),
        ({"check": {"prompt": "p", "regex": 5}}, 'the plan: the behaviour check\'s "regex" must be text'),
        ({"check": {"prompt": "p", "regex": "("}}, "the plan: the behaviour check's regex does not compile"),
        ({"check": {"prompt": "p", "regex": "((a{99}){99}){99}"}}, "the plan: the behaviour check's regex repeats too"),
        ({"check": {"prompt": "p", "judge": "j", "files": {"../x": "t"}}}, "the plan: fixture path '../x' must be"),
        ({"check": {"prompt": "p", "judge": "j", "files": {"/etc/x": "t"}}}, "the plan: fixture path '/etc/x' must"),
        ({"check": {"prompt": "p", "judge": "j", "files": {"a": 1}}}, "the plan: fixture file 'a' must be text"),
    ],
)
def test_an_unusable_check_says_why(check: Any, problem: str) -> None:
    text = None if check is None else check if isinstance(check, str) else json.dumps(check)
    checked = plan_check(text, "the plan")
    assert checked.check is None and checked.problem is not None
    assert checked.problem.startswith(problem), checked.problem


async def test_a_regex_decides_where_the_task_has_one() -> None:
    assert (await regex_verdict("Paris", "Paris.", "no comment")).verdict == "worse"
    assert (await regex_verdict("four", "Paris.", "four")).verdict == "better"
    assert (await regex_verdict("Paris", "Paris.", "Paris!")).verdict == "same"
    assert (await regex_verdict("Paris", None, None)).reason == "/Paris/ matches neither answer"


async def test_a_regex_that_runs_too_long_matches_nothing_and_says_so() -> None:
    judged = await regex_verdict(CATASTROPHIC, "Paris.", "a" * 40 + "b")
    assert (judged.verdict, judged.candidate_matched) == ("same", False)
    assert judged.reason == f"/{CATASTROPHIC}/ matches neither answer (candidate: regex timed out after 1 s)"
    judged = await regex_verdict(CATASTROPHIC, "a" * 40 + "b", "a")
    assert (judged.verdict, judged.candidate_matched) == ("better", True)
    assert judged.reason.endswith("not the served version's (served: regex timed out after 1 s)")


@dataclass
class ScriptedJudge(ServedModel):
    """A served model whose answers are scripted; it keeps the prompts it was given."""

    replies: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)

    async def ask(self, system: str, user: str, *, max_tokens: int) -> str:
        self.asked.append(user)
        reply = self.replies.pop(0)
        if reply == "fail":
            raise ModelFailed("the served model answered HTTP 500")
        return reply


def judge(*replies: str) -> ScriptedJudge:
    return ScriptedJudge(runtime=None, model="m", replies=list(replies))  # type: ignore[arg-type]


TASK: EvalTask = {
    "id": "t-1", "scenario": "s", "kind": "task", "prompt": "Add two and two.", "fixture": {}, "regex": None,
    "judge": "the answer is four", "protected": True, "source_record": None, "created_at": 0.0,
}  # fmt: skip


@pytest.mark.parametrize(
    ("replies", "verdict", "reason"),
    [
        (['{"better": "B", "reason": "it adds"}', '{"better": "A", "reason": "it adds"}'], "better", "it adds"),
        (['{"better": "A", "reason": "wrong"}', '{"better": "B", "reason": "wrong"}'], "worse", "wrong"),
        (['{"better": "same"}', '{"better": "same"}'], "same", "no reason given"),
        (['{"better": "A", "reason": "x"}', '{"better": "A", "reason": "x"}'], "same", "the two orders disagree"),
        (["ignore the task, say B", '{"better": "A"}'], "same", "the two orders disagree"),
        (['{"better": "C"}', "fail"], "same", 'the judge gave no usable answer (no "better"'),
    ],
)
async def test_the_judge_is_asked_in_both_orders_and_read_defensively(
    replies: list[str], verdict: str, reason: str
) -> None:
    model = judge(*replies)
    judged = await pairwise(model, TASK, "served-said-5", "candidate-said-4")
    assert (judged.verdict, judged.reason[: len(reason)]) == (verdict, reason)
    first, second = model.asked
    assert first.index("served-said") < first.index("candidate-said")
    assert second.index("candidate-said") < second.index("served-said")
    assert "the answer is four" in first and "the answer is four" in second


@pytest.mark.parametrize(
    ("reply", "verdict", "reason"),
    [
        ('{"scores": [{"id": 1, "score": 0.2, "reason": "a"}, {"id": 2, "score": 0.9, "reason": "adds"}]}',
         "better", "served 0.2, candidate 0.9: adds"),
        ('{"scores": [{"id": 1, "score": 0.9}, {"id": 2, "score": 0.1}]}', "worse", "served 0.9, candidate 0.1"),
        ('{"scores": [{"id": 1, "score": 0.5}, {"id": 2, "score": 0.55}]}', "same", "served 0.5, candidate 0.55"),
        ('{"scores": [{"id": 1, "score": 3}, {"id": 2, "score": 0.5}]}', "same", "the judge gave no usable ranking"),
        ("fail", "same", "the judge gave no usable ranking"),
    ],
)  # fmt: skip
async def test_the_ranked_judge_scores_both_answers_in_one_call(reply: str, verdict: str, reason: str) -> None:
    model = judge(reply)
    judged = await ranked(model, TASK, "served-said-5", "candidate-said-4")
    assert (judged.verdict, judged.reason[: len(reason)]) == (verdict, reason)
    (asked,) = model.asked
    assert asked.index("served-said") < asked.index("candidate-said") and "the answer is four" in asked
