"""Records: inference exchanges and the reports that score them. Writes go through the group-commit writer."""

from __future__ import annotations

import asyncio
import functools
import json
import re
from dataclasses import dataclass

from reef_contract import (
    COUNT_TOKENS_ROUTE,
    INTERNAL_SCENARIOS,
    PERSON_SOURCE,
    RecordPage,
    RecordRow,
    RecordType,
    StoredRecord,
)
from reef_daemon.errors import BadRequest, Conflict, NotFound
from reef_daemon.jsoncodec import dumps_text
from reef_daemon.records import ClientRecordDraft, ExchangeFacts, InferenceDraft, summarize
from reef_daemon.store.engines.engine import Columns, Connection
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.schema import of_types
from reef_daemon.store.engines.writer import GroupCommitWriter, WriteContext
from reef_daemon.store.rows import DETAIL_COLUMNS, SUMMARY_COLUMNS, detail_row, record_event, record_row, summary_row
from reef_daemon.store.source_trust import SourceTrust, rescore

_PREFIX = re.compile(r"[0-9a-f]{8,31}")  # part of a record id, from its start

MAX_PAGE = 500
# An exchange up to this size (request and response) is brief (writer.py): its commit on the loop pauses the loop
# well under a millisecond on this kind of machine (bench/README.md), while handing it to the writer's thread
# would be a large share of its commit. Larger ones are committed on the thread.
BRIEF_EXCHANGE_BYTES = 64 * 1024
_ADD_SCORE = "INSERT INTO record_scores (record_id, source, score, report_id, created_at) VALUES (?,?,?,?,?)"
# A derived source scores a record once; a person's later report replaces their earlier score, and so does a later
# outcome with another score (a CI failure after a scan found the change kept).
_KEEP_FIRST_SCORE = f"{_ADD_SCORE} ON CONFLICT (record_id, source) DO NOTHING"
REVISED_SOURCES = ("outcome",)
_KEEP_LATEST_SCORE = (
    f"{_ADD_SCORE} ON CONFLICT (record_id, source) DO UPDATE SET score = excluded.score,"
    " report_id = excluded.report_id, created_at = excluded.created_at"
)
# Records per scenario, and client records (migration 15's indexes) per scenario and type: indexes alone.
_COUNTS = (
    "SELECT scenario, NULL AS type, count(*) AS total FROM records GROUP BY scenario UNION ALL"
    " SELECT scenario, type, count(*) AS total FROM records WHERE type != 'inference' GROUP BY scenario, type"
)
_INFERENCE_COLUMNS = (
    "sequence, id, scenario, type, created_at, route, model, status, complete, duration_ms, input_tokens,"
    " output_tokens, score, source, release, asked, answered, ttft_ms, overhead_ms, request, response, error, tags,"
    " tokens, answer"
)


@functools.lru_cache(maxsize=256)
def _inference_insert(nulls: tuple[bool, ...]) -> str:
    """The INSERT of an exchange with each None value written into the statement as NULL, not bound: sqlite3 binds
    None only after looking for an adapter (two failed attribute look-ups, each raising), which cost more than
    the row's own insert. An exchange's values come in a few shapes, each one cached statement."""
    marks = ",".join("NULL" if null else "?" for null in nulls)
    return f"INSERT INTO records ({_INFERENCE_COLUMNS}) VALUES ({marks})"  # noqa: S608 - constants only


# An exchange that awaits a score (contract.awaits_score), as the per-scenario unscored index reads it.
_UNSCORED = "type = 'inference' AND score IS NULL AND (route IS NULL OR route != ?)"
# The scenarios with an unscored exchange, one index probe each, and the newest sequence as of that snapshot.
_UNSCORED_SCENARIOS = (
    "WITH RECURSIVE pending (scenario) AS ("
    " SELECT min(scenario) FROM records WHERE type = 'inference' AND score IS NULL"
    " UNION ALL SELECT (SELECT min(scenario) FROM records WHERE type = 'inference' AND score IS NULL"
    " AND scenario > pending.scenario) FROM pending WHERE pending.scenario IS NOT NULL)"
    " SELECT scenario, (SELECT max(sequence) FROM records) AS newest FROM pending WHERE scenario IS NOT NULL"
)
_SCENARIOS_A_STATEMENT = 100  # SQLite allows 500 terms in a compound SELECT
# A record and the reports that reference it (RecordStore.list shadows `list` in the class body).
WithReports = tuple[StoredRecord, list[StoredRecord]]


@dataclass(frozen=True)
class RecordQuery:
    scenario: str | None = None
    type: RecordType | None = None
    unscored: bool = False
    after: int | None = None
    before: int | None = None
    limit: int = 50


class RecordStore:
    def __init__(self, writer: GroupCommitWriter, reader: Reader, trust: SourceTrust) -> None:
        self._writer = writer
        self._reader = reader
        self._trust = trust

    async def append_inference(self, draft: InferenceDraft) -> RecordRow:
        """Store an exchange; returns its row once committed (the receipt may go out then)."""
        return await self.enqueue_inference(draft)

    def enqueue_inference(self, draft: InferenceDraft) -> asyncio.Future[RecordRow]:
        """Queue an exchange for the next commit; the future gives its row once committed. The record is written
        whether or not the future is awaited or cancelled (a client that leaves cannot stop it)."""
        brief = len(draft.request) + len(draft.response) <= BRIEF_EXCHANGE_BYTES
        return self._writer.enqueue(lambda ctx: self._insert_inference(ctx, draft), fallible=False, brief=brief)

    def insert_inference(self, ctx: WriteContext, draft: InferenceDraft) -> RecordRow:
        """Store an exchange inside a write already under way (an import batch writes many in one)."""
        return self._insert_inference(ctx, draft)

    def _insert_inference(self, ctx: WriteContext, draft: InferenceDraft) -> RecordRow:
        summary = summarize(draft)
        sequence = ctx.allocate_sequence()
        words = summary.preview or {"asked": None, "answered": None}
        kind: RecordType = "inference"
        values = (
            sequence, draft.id, draft.scenario, kind, draft.created_at, draft.route, summary.model,
            draft.status, int(draft.complete), draft.duration_ms, summary.input_tokens, summary.output_tokens,
            None, None, draft.release, words["asked"], words["answered"],
        )  # fmt: skip
        stored = (
            *values, draft.ttft_ms, draft.overhead_ms, draft.request, summary.response, draft.error,
            dumps_text(draft.tags) if draft.tags else None,
            dumps_text(draft.tokens) if draft.tokens is not None else None,
            dumps_text(summary.answer) if summary.answer is not None else None,
        )  # fmt: skip
        nulls = tuple([value is None for value in stored])
        ctx.conn.execute(_inference_insert(nulls), [value for value in stored if value is not None])
        row = record_row(*values)
        ctx.announce(record_event(row, {}, ExchangeFacts.from_draft(draft, summary)))
        return row

    async def append_client_record(self, draft: ClientRecordDraft) -> tuple[RecordRow, bool]:
        """Store a report or request. Returns (row, created); an identical retry returns the stored row, not created."""
        return await self._writer.submit(lambda ctx: self.insert_client_record(ctx, draft))

    def insert_client_record(self, ctx: WriteContext, draft: ClientRecordDraft) -> tuple[RecordRow, bool]:
        """Store a report or request inside a write already under way (a caller that writes more in the same
        transaction: a report that creates its scenario, an import batch).

        A report's score becomes each referenced record's score from its source (a person's latest replaces their
        earlier one); the record's own score is then the one of the first source in SOURCE_PRECEDENCE it has that its
        scenario trusts (store/source_trust.py). A derived report (any source but a person) scores one record, and only
        once: another from the same source for the same record returns the stored report, not created; but a later
        outcome with another score is a new report that replaces the earlier outcome's score (what happened to the code
        can change: CI failed on it)."""
        conn = ctx.conn
        references: list[str] = draft.content.get("references", [])
        source = draft.source if draft.type == "report" else None
        derived = source is not None and source != PERSON_SOURCE
        if source is not None and derived:  # checked first: a later one (new content, the same id) is not new
            earlier = _derived_report(conn, references, source)
            if earlier is not None and not (
                source in REVISED_SOURCES and earlier["score"] != draft.content.get("score")
            ):
                return earlier, False
        existing = conn.execute(
            f"SELECT {SUMMARY_COLUMNS}, content_hash FROM records WHERE id = ?",  # noqa: S608 - a constant
            (draft.id,),
        ).fetchone()
        if existing is not None:
            same = (existing["content_hash"], existing["scenario"], existing["type"])
            if same != (draft.content_hash, draft.scenario, draft.type):
                raise Conflict(
                    f"agent_record_id '{draft.id}' was already used for different content; use a new id",
                    type="record_conflict",
                )
            return summary_row(existing), False
        self._check_references(conn, draft.scenario, references)
        score = draft.content.get("score")
        sequence = ctx.allocate_sequence()
        values = (
            sequence, draft.id, draft.scenario, draft.type, draft.created_at, None, None, None, None, None,
            None, None, score, source, None, None, None,
        )  # fmt: skip
        conn.execute(
            "INSERT INTO records (sequence, id, scenario, type, created_at, route, model, status, complete,"
            " duration_ms, input_tokens, output_tokens, score, source, release, asked, answered, body,"
            " content_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*values, json.dumps(draft.content, ensure_ascii=False), draft.content_hash),
        )
        conn.executemany(
            "INSERT INTO report_references (record_id, report_sequence) VALUES (?, ?)",
            [(ref, sequence) for ref in references],
        )
        if score is not None and source is not None:
            conn.executemany(
                _KEEP_FIRST_SCORE if derived and source not in REVISED_SOURCES else _KEEP_LATEST_SCORE,
                [(ref, source, score, draft.id, draft.created_at) for ref in references],
            )
            for ref in references:
                rescore(conn, ref)
            self._trust.review(ctx, draft.scenario, references)
        row = record_row(*values)
        ctx.announce(record_event(row, draft.content))
        return row, True

    @staticmethod
    def _check_references(conn: Connection, scenario: str, references: list[str]) -> None:
        for ref in references:
            found = conn.execute("SELECT scenario, type FROM records WHERE id = ?", (ref,)).fetchone()
            if found is None:
                raise BadRequest(f"references: receipt '{ref}' is not a stored record", type="unknown_reference")
            if found["scenario"] != scenario:
                raise BadRequest(f"references: receipt '{ref}' belongs to another scenario", type="foreign_reference")
            if found["type"] != "inference":
                raise BadRequest(
                    f"references: '{ref}' is a {found['type']} record; only inference receipts can be scored",
                    type="bad_reference",
                )

    async def list(self, query: RecordQuery) -> RecordPage:
        return await self._reader.run(lambda conn: self._list(conn, query))

    @staticmethod
    def _list(conn: Connection, query: RecordQuery) -> RecordPage:
        clauses: list[str] = []
        params: list[str | int] = []
        if query.unscored:  # contract.awaits_score, in SQL
            clauses.append(_UNSCORED)
            params.append(COUNT_TOKENS_ROUTE)
        elif query.type is not None:
            clause, types = of_types((query.type,))
            clauses.append(clause)
            params.extend(types)
        ascending = query.after is not None
        if query.after is not None:
            clauses.append("sequence > ?")
            params.append(query.after)
        elif query.before is not None:
            clauses.append("sequence < ?")
            params.append(query.before)
        order = "ASC" if ascending else "DESC"
        if query.unscored and query.scenario is None:
            rows = _unscored_everywhere(conn, clauses, params, order, query.limit + 1)
        else:
            if query.scenario is not None:
                clauses.insert(0, "scenario = ?")
                params.insert(0, query.scenario)
            where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
            rows = conn.execute(
                f"SELECT {SUMMARY_COLUMNS} FROM records {where} ORDER BY sequence {order} LIMIT ?",  # noqa: S608 - fixed clauses
                (*params, query.limit + 1),
            ).fetchall()
        more = len(rows) > query.limit
        records = [summary_row(r) for r in rows[: query.limit]]
        if not records:
            return {"records": [], "next_after": query.after, "next_before": None}
        sequences = [r["sequence"] for r in records]
        newest, oldest = max(sequences), min(sequences)
        if ascending:
            return {"records": records, "next_after": newest, "next_before": oldest}
        return {"records": records, "next_after": newest, "next_before": oldest if more else None}

    async def get(self, record_id: str) -> StoredRecord:
        """One record in full; NotFound if there is none with this id."""
        return await self._reader.run(lambda conn: self._get(conn, record_id))

    async def get_with_reports(self, record_id: str) -> WithReports:
        """One record in full and the reports that reference it, oldest first, read together. The record may be
        named by a unique prefix of its id (lists show receipts shortened, as git shortens hashes)."""

        def read(conn: Connection) -> WithReports:
            record = (
                self._get_by_prefix(conn, record_id) if _PREFIX.fullmatch(record_id) else self._get(conn, record_id)
            )
            return record, _reports_on(conn, record["id"])

        return await self._reader.run(read)

    @staticmethod
    def _get_by_prefix(conn: Connection, prefix: str) -> StoredRecord:
        # Ids are lowercase hex, all below "g": the prefix's records are the index's range [prefix, prefix + "g").
        found = conn.execute(
            f"SELECT {DETAIL_COLUMNS} FROM records WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",  # noqa: S608
            (prefix, f"{prefix}g"),
        ).fetchall()
        if not found:
            raise NotFound(f"no record with id '{prefix}' or an id starting with it", type="unknown_record")
        if len(found) > 1:
            raise Conflict(
                f"several records' ids start with '{prefix}'; give more of the receipt", type="ambiguous_record"
            )
        return detail_row(found[0])

    @staticmethod
    def _get(conn: Connection, record_id: str) -> StoredRecord:
        found = conn.execute(f"SELECT {DETAIL_COLUMNS} FROM records WHERE id = ?", (record_id,)).fetchone()  # noqa: S608
        if found is None:
            raise NotFound(f"no record with id '{record_id}'", type="unknown_record")
        return detail_row(found)

    async def counts(self) -> dict[str, dict[str, int]]:
        """Per scenario: how many records of each type, and how many inference records are unscored."""
        return await self._reader.run(self._counts)

    @staticmethod
    def _counts(conn: Connection) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        # One statement (one snapshot) that reads indexes alone: every record per scenario, and the client records
        # (migration 15) per type; the rest are inference records.
        for row in conn.execute(_COUNTS):
            of_scenario = counts.setdefault(row["scenario"], {"inference": 0})
            if row["type"] is None:
                of_scenario["inference"] += row["total"]
            else:
                of_scenario[row["type"]] = row["total"]
                of_scenario["inference"] -= row["total"]
        for of_scenario in counts.values():
            if not of_scenario["inference"]:
                del of_scenario["inference"]
        for row in conn.execute(
            f"SELECT scenario, count(*) AS total FROM records WHERE {_UNSCORED} GROUP BY scenario",  # noqa: S608
            (COUNT_TOKENS_ROUTE,),
        ):
            counts.setdefault(row["scenario"], {})["unscored"] = row["total"]
        return counts


def _unscored_everywhere(
    conn: Connection, clauses: list[str], params: list[str | int], order: str, limit: int
) -> list[Columns]:
    """The unscored exchanges of every scenario but the internal ones, in `order` of sequence, at most `limit`: each
    scenario's own from its unscored index (no index holds every scenario's: an exchange's commit writes one
    fewer, migration 16), merged. Every read stops at the newest sequence of the snapshot that named the
    scenarios, so a page holds no record newer than one it leaves out (`next_after` skips nothing)."""
    found = conn.execute(_UNSCORED_SCENARIOS).fetchall()
    scenarios = [row["scenario"] for row in found if row["scenario"] not in INTERNAL_SCENARIOS]
    if not scenarios:
        return []
    bounded = " AND ".join(["scenario = ?", *clauses, "sequence <= ?"])
    one = f"SELECT * FROM (SELECT {SUMMARY_COLUMNS} FROM records WHERE {bounded} ORDER BY sequence {order} LIMIT ?)"  # noqa: S608 - fixed clauses
    rows: list[Columns] = []
    for start in range(0, len(scenarios), _SCENARIOS_A_STATEMENT):
        chunk = scenarios[start : start + _SCENARIOS_A_STATEMENT]
        statement = " UNION ALL ".join(f"{one} AS s{n}" for n in range(len(chunk)))
        values = [v for scenario in chunk for v in (scenario, *params, found[0]["newest"], limit)]
        rows.extend(conn.execute(f"{statement} ORDER BY sequence {order} LIMIT ?", (*values, limit)).fetchall())
    rows.sort(key=lambda row: row["sequence"], reverse=order == "DESC")
    return rows[:limit]


def _derived_report(conn: Connection, references: list[str], source: str) -> RecordRow | None:
    """The report from `source` already scoring one of `references`, if there is one."""
    for ref in references:
        found = conn.execute(
            f"SELECT {SUMMARY_COLUMNS} FROM records WHERE id ="  # noqa: S608 - a constant
            " (SELECT report_id FROM record_scores WHERE record_id = ? AND source = ?)",
            (ref, source),
        ).fetchone()
        if found is not None:
            return summary_row(found)
    return None


def _reports_on(conn: Connection, record_id: str) -> list[StoredRecord]:
    reports = conn.execute(
        f"SELECT {DETAIL_COLUMNS} FROM records WHERE sequence IN"  # noqa: S608
        " (SELECT report_sequence FROM report_references WHERE record_id = ?) ORDER BY sequence",
        (record_id,),
    ).fetchall()
    return [detail_row(r) for r in reports]
