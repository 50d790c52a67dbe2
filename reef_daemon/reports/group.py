"""A judge ranks several answers to one prompt against each other, in one call, and each answer gets a `judge`
report with its relative score: `POST /reef/judge/group` asks for it, and so does a retry (the answer sent again and
the one that replaced it) where the next-turn judge is on."""

from __future__ import annotations

from collections.abc import Sequence

from reef_contract import GroupAnswer, GroupScore, ReportSource, StoredRecord
from reef_daemon.reports.derived import derived_report
from reef_daemon.reports.judge import JudgeModel, on_scale, rank_group
from reef_daemon.reports.turns import answer_text, request_turns
from reef_daemon.settings import ReportsSection
from reef_daemon.store import Store

SOURCE: ReportSource = "judge"


async def judge_group(
    store: Store, judge: JudgeModel, settings: ReportsSection, scenario: str, records: Sequence[StoredRecord]
) -> GroupAnswer:
    """Rank `records`' answers (answered exchanges of `scenario` with one prompt) and store each one's `judge`
    report (one per record: a record judged before keeps its report); none when the judge gave no usable ranking."""
    calls: list[str] = []

    async def ask(system: str, user: str) -> str | None:
        call = await judge.ask(system, user, model=records[0]["model"], tags={"judge": "group"})
        calls.extend([call.record_id] if call.record_id else [])
        return call.text

    ranked = await rank_group(ask, _context(records[0]), [answer_text(r["answer"]) for r in records],
                              max_chars=settings.judge_max_prompt_chars)  # fmt: skip
    if ranked is None:
        return {"scenario": scenario, "judged": False, "reason": "the judge gave no usable ranking", "scores": []}
    references = [record["id"] for record in records]
    scores: list[GroupScore] = []
    for record, place in zip(records, ranked, strict=True):
        score = on_scale(place.place, settings.score_min, settings.score_max)
        evidence = {"group": references, "place": place.place, "judge_model": judge.model, "judge_record": calls[-1]}
        draft = derived_report(scenario, record["id"], SOURCE, score, place.reason, evidence)
        row, created = await store.records.append_client_record(draft)
        kept = row["score"] if row["score"] is not None else score
        scores.append({"id": record["id"], "score": kept, "reason": place.reason, "report_id": row["id"],
                       "created": created})  # fmt: skip
    return {"scenario": scenario, "judged": True, "reason": None, "scores": scores}


def _context(record: StoredRecord) -> str:
    """The prompt the group shares, as the judge reads it: each turn as `role: text`."""
    turns = request_turns(str(record["route"] or ""), record["request"])
    return "\n".join(f"{turn.role}: {turn.shown}" for turn in turns)
