"""`POST /reef/judge/group`: a judge ranks several answers to one prompt against each other, in one call, and each
answer gets a `judge` report with its relative score (GRPO's reward where no person scores the rollouts)."""

from __future__ import annotations

from aiohttp import web

from reef_daemon.context import DAEMON
from reef_daemon.contract import JUDGE_GROUP_ROUTE, MAX_GROUP, SCENARIO_HEADER, GroupAnswer, GroupScore, StoredRecord
from reef_daemon.errors import BadRequest, Conflict
from reef_daemon.jsonbody import json_response, read_json_object
from reef_daemon.names import scenario_from_header
from reef_daemon.reports.derived import derived_report
from reef_daemon.reports.judge import on_scale, rank_group
from reef_daemon.reports.turns import answer_text, request_turns

routes = web.RouteTableDef()


@routes.post(JUDGE_GROUP_ROUTE)
async def judge_group(request: web.Request) -> web.Response:
    """Rank 2 to 8 answers to the same prompt against each other with the deployment's judge; each gets a `judge`
    report (one per record: a record judged before keeps its report). A judge with no usable ranking stores none; a
    409 when the judge would be the served model and that model is the policy the deployment trains."""
    daemon = request.app[DAEMON]
    scenario = daemon.store.scenarios.require(scenario_from_header(request.headers.get(SCENARIO_HEADER))).name
    body = await read_json_object(request)
    references = body.get("references")
    if (
        not isinstance(references, list)
        or not all(isinstance(ref, str) for ref in references)
        or not 2 <= len(set(references)) == len(references) <= MAX_GROUP
    ):
        raise BadRequest(f"references: 2 to {MAX_GROUP} different receipts of answers to one prompt", type="bad_group")
    records = [await daemon.store.records.get(ref) for ref in references]
    for record in records:
        if record["scenario"] != scenario or record["type"] != "inference" or record.get("answer") is None:
            raise BadRequest(
                f"references: '{record['id']}' is not an answered exchange of {scenario}", type="bad_group"
            )
    if daemon.judge is None:
        raise RuntimeError("the judge is not started")
    judge, settings = daemon.judge, daemon.settings.reports
    if judge.refused is not None:
        raise Conflict(judge.refused, type="self_judging")
    calls: list[str] = []

    async def ask(system: str, user: str) -> str | None:
        call = await judge.ask(system, user, model=records[0]["model"], tags={"judge": "group"})
        calls.extend([call.record_id] if call.record_id else [])
        return call.text

    ranked = await rank_group(ask, _context(records[0]), [answer_text(r["answer"]) for r in records],
                              max_chars=settings.judge_max_prompt_chars)  # fmt: skip
    if ranked is None:
        refused: GroupAnswer = {
            "scenario": scenario, "judged": False, "reason": "the judge gave no usable ranking", "scores": [],
        }  # fmt: skip
        return json_response(refused)
    scores: list[GroupScore] = []
    for record, place in zip(records, ranked, strict=True):
        score = on_scale(place.place, settings.score_min, settings.score_max)
        evidence = {"group": references, "place": place.place, "judge_model": judge.model, "judge_record": calls[-1]}
        draft = derived_report(scenario, record["id"], "judge", score, place.reason, evidence)
        row, created = await daemon.store.records.append_client_record(draft)
        kept = row["score"] if row["score"] is not None else score
        scores.append({"id": record["id"], "score": kept, "reason": place.reason, "report_id": row["id"],
                       "created": created})  # fmt: skip
    answer: GroupAnswer = {"scenario": scenario, "judged": True, "reason": None, "scores": scores}
    return json_response(answer)


def _context(record: StoredRecord) -> str:
    """The prompt the group shares, as the judge reads it: each turn as `role: text`."""
    turns = request_turns(str(record["route"] or ""), record["request"])
    return "\n".join(f"{turn.role}: {turn.shown}" for turn in turns)
