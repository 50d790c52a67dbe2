"""The database schema, as numbered migrations applied in order. The version is tracked by the engine (SQLite's
`PRAGMA user_version`, a `reef_schema` row in PostgreSQL); the DDL is written in SQLite's types and each engine
reads it in its own (engine.Engine.ddl)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from reef_contract import SOURCE_PRECEDENCE
from reef_daemon.records import preview, stored_answer
from reef_daemon.store.engines.engine import Connection, Engine, StoreUnavailable

Migration = str | Callable[[Connection], None]  # an SQL script, or a step that needs Python


def _keep_answers(conn: Connection) -> None:
    """Add `answer` (JSON): the assistant's message, assembled when the record is written. Records stored before
    get theirs now, from their stored response, by the same assembler."""
    conn.execute("ALTER TABLE records ADD COLUMN answer TEXT")
    after = 0
    while True:
        rows = conn.execute(
            "SELECT sequence, route, response FROM records"
            " WHERE type = 'inference' AND status < 400 AND sequence > ? ORDER BY sequence LIMIT 200",
            (after,),
        ).fetchall()
        if not rows:
            return
        for row in rows:
            answer = stored_answer(str(row["route"]), row["response"])
            if answer is not None:
                conn.execute(
                    "UPDATE records SET answer = ? WHERE sequence = ?",
                    (json.dumps(answer, ensure_ascii=False), row["sequence"]),
                )
        after = rows[-1]["sequence"]


def _keep_previews(conn: Connection) -> None:
    """Add `asked` and `answered`: the first words of each exchange, which lists show. Records stored before get
    theirs now, from their stored request and answer, by the same rule."""
    conn.execute("ALTER TABLE records ADD COLUMN asked TEXT")
    conn.execute("ALTER TABLE records ADD COLUMN answered TEXT")
    after = 0
    while True:
        rows = conn.execute(
            "SELECT sequence, route, request, answer FROM records"
            " WHERE type = 'inference' AND sequence > ? ORDER BY sequence LIMIT 200",
            (after,),
        ).fetchall()
        if not rows:
            return
        for row in rows:
            words = preview(str(row["route"]), row["request"], json.loads(row["answer"]) if row["answer"] else None)
            if words is not None:
                conn.execute(
                    "UPDATE records SET asked = ?, answered = ? WHERE sequence = ?",
                    (words["asked"], words["answered"], row["sequence"]),
                )
        after = rows[-1]["sequence"]


# The rank of each report source in SQL: the lowest present is the one a record's score comes from (person first).
SOURCE_RANK = (
    "CASE source "
    + " ".join(f"WHEN '{source}' THEN {rank}" for rank, source in enumerate(SOURCE_PRECEDENCE))
    + f" ELSE {len(SOURCE_PRECEDENCE)} END"
)


def of_types(types: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """`type IN (…)` in SQL, with its parameters; for client records only it also says `type != 'inference'`, the
    condition of the indexes that hold them (migration 15), which neither engine's planner infers from the list."""
    clause = f"type IN ({','.join('?' * len(types))})"
    if "inference" not in types:
        clause += " AND type != 'inference'"
    return clause, tuple(types)


def _report_sources(conn: Connection) -> None:
    """Give reports stored before sources their source (`source`: where a report came from; for an inference
    record, where its score came from) and each record its latest score per source (`record_scores`): a person's,
    or one that came with an imported conversation."""
    after = 0
    while True:
        rows = conn.execute(
            "SELECT sequence, id, created_at, body FROM records WHERE type = 'report' AND sequence > ?"
            " ORDER BY sequence LIMIT 200",
            (after,),
        ).fetchall()
        if not rows:
            break
        for row in rows:
            content = json.loads(row["body"]) if row["body"] else {}
            references = [ref for ref in content.get("references", []) if isinstance(ref, str)]
            imported = bool(references) and all(
                (found := conn.execute("SELECT tags FROM records WHERE id = ?", (ref,)).fetchone()) is not None
                and "imported" in json.loads(found["tags"] or "{}")
                for ref in references
            )
            source = "import" if imported else "person"
            conn.execute("UPDATE records SET source = ? WHERE sequence = ?", (source, row["sequence"]))
            score = content.get("score")
            if isinstance(score, int | float):
                conn.executemany(
                    "INSERT INTO record_scores (record_id, source, score, report_id, created_at) VALUES (?,?,?,?,?)"
                    " ON CONFLICT (record_id, source) DO UPDATE SET score = excluded.score,"
                    " report_id = excluded.report_id, created_at = excluded.created_at",
                    [(ref, source, float(score), row["id"], row["created_at"]) for ref in references],
                )
        after = rows[-1]["sequence"]
    conn.execute(
        "UPDATE records SET source = (SELECT source FROM record_scores WHERE record_id = records.id"  # noqa: S608
        f" ORDER BY {SOURCE_RANK} LIMIT 1) WHERE type = 'inference' AND score IS NOT NULL"
    )


MIGRATIONS: tuple[Migration, ...] = (
    # 1: scenarios, records of every type, the references of reports, and durable non-record events.
    """
    CREATE TABLE scenarios (
        name TEXT PRIMARY KEY,
        recipe TEXT NOT NULL,
        training_mode TEXT NOT NULL,
        created_at REAL NOT NULL,
        archived_at REAL,
        archived_as TEXT
    );
    CREATE TABLE records (
        sequence INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        scenario TEXT NOT NULL,
        type TEXT NOT NULL,
        created_at REAL NOT NULL,
        route TEXT,
        model TEXT,
        status INTEGER,
        complete INTEGER,
        duration_ms REAL,
        ttft_ms REAL,
        overhead_ms REAL,
        input_tokens INTEGER,
        output_tokens INTEGER,
        release TEXT,
        score REAL,
        request BLOB,
        response BLOB,
        error TEXT,
        tags TEXT,
        tokens TEXT,
        body TEXT,
        content_hash TEXT
    );
    CREATE INDEX records_by_scenario ON records (scenario, sequence);
    CREATE INDEX records_by_type ON records (type, sequence);
    CREATE INDEX records_by_scenario_type ON records (scenario, type, sequence);
    CREATE INDEX records_unscored ON records (sequence) WHERE type = 'inference' AND score IS NULL;
    CREATE INDEX records_unscored_by_scenario ON records (scenario, sequence)
        WHERE type = 'inference' AND score IS NULL;
    CREATE TABLE report_references (
        record_id TEXT NOT NULL,
        report_sequence INTEGER NOT NULL,
        PRIMARY KEY (record_id, report_sequence)
    ) WITHOUT ROWID;
    CREATE TABLE events (
        sequence INTEGER PRIMARY KEY,
        type TEXT NOT NULL,
        scenario TEXT,
        created_at REAL NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX events_by_scenario ON events (scenario, sequence);
    """,
    # 2: what recipes did: committed steps, the records each consumed (at most once), the records judged
    # ineligible with their reason, and each scenario's read position.
    """
    CREATE TABLE steps (
        scenario TEXT NOT NULL,
        step INTEGER NOT NULL,
        operation TEXT NOT NULL,
        result TEXT NOT NULL,
        release_id TEXT,
        parent_release_id TEXT,
        request_id TEXT,
        consumed TEXT NOT NULL,
        metrics TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (scenario, step)
    ) WITHOUT ROWID;
    CREATE TABLE consumed_records (
        record_id TEXT PRIMARY KEY,
        scenario TEXT NOT NULL,
        step INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE ineligible_records (
        record_id TEXT PRIMARY KEY,
        scenario TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX ineligible_by_scenario ON ineligible_records (scenario, reason);
    CREATE TABLE recipe_cursors (
        scenario TEXT PRIMARY KEY,
        sequence INTEGER NOT NULL
    ) WITHOUT ROWID;
    """,
    # 3: the durable progress of harness change requests (reefine): phase, activity lines, design, outcome.
    """
    CREATE TABLE harness_requests (
        id TEXT PRIMARY KEY,
        scenario TEXT NOT NULL,
        state TEXT NOT NULL,
        design TEXT,
        activity TEXT NOT NULL,
        outcome TEXT,
        started_at REAL NOT NULL,
        updated_at REAL NOT NULL
    ) WITHOUT ROWID;
    """,
    # 4: each inference record keeps its assembled answer.
    _keep_answers,
    # 5: each inference record keeps the first words of its exchange.
    _keep_previews,
    # 6: evaluation tasks, and what was decided about replays (a record dismissed, or promoted to a task).
    """
    CREATE TABLE eval_tasks (
        id TEXT PRIMARY KEY,
        scenario TEXT NOT NULL,
        prompt TEXT NOT NULL,
        fixture TEXT NOT NULL,
        regex TEXT,
        judge TEXT,
        protected INTEGER NOT NULL,
        source_record TEXT,
        created_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX eval_tasks_by_scenario ON eval_tasks (scenario, created_at);
    CREATE TABLE replay_decisions (
        record_id TEXT PRIMARY KEY,
        scenario TEXT NOT NULL,
        decision TEXT NOT NULL,
        prompt TEXT NOT NULL,
        created_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX replay_decisions_by_scenario ON replay_decisions (scenario);
    """,
    # 7: live scores group a scenario's inference records by the harness release they were tagged with (the
    # `release` tag an installed harness sends); a scenario's running canary, which survives a restart.
    """
    CREATE INDEX records_by_harness_release ON records (scenario, json_extract(tags, '$.release'), score)
        WHERE type = 'inference';
    CREATE TABLE canaries (
        scenario TEXT PRIMARY KEY,
        release_id TEXT NOT NULL,
        version TEXT NOT NULL,
        share REAL NOT NULL,
        served_release_id TEXT NOT NULL,
        started_at REAL NOT NULL
    ) WITHOUT ROWID;
    """,
    # 8: the canary check after each report reads two releases' scores since the canary started; with the time
    # in the index beside the score that read touches only the index entries of that period (the grouping of
    # the per-version scores reads the same index).
    """
    DROP INDEX records_by_harness_release;
    CREATE INDEX records_by_harness_release_time
        ON records (scenario, json_extract(tags, '$.release'), created_at, score) WHERE type = 'inference';
    """,
    # 9: a change request's record type is `request` (it was `train`).
    "UPDATE records SET type = 'request' WHERE type = 'train';",
    # 10: when the retention budget dropped a record's bodies (request, response, answer, token data).
    "ALTER TABLE records ADD COLUMN trimmed_at REAL;",
    # 11: where a scenario's releases are kept (host and state directory), for daemons that share the store.
    """
    CREATE TABLE release_homes (
        scenario TEXT PRIMARY KEY,
        home TEXT NOT NULL
    ) WITHOUT ROWID;
    """,
    # 12: where each report came from (a person, or derived: the next turn, a judge, the code's outcome, an import)
    # and each record's score per source, one per source.
    """
    ALTER TABLE records ADD COLUMN source TEXT;
    CREATE TABLE record_scores (
        record_id TEXT NOT NULL,
        source TEXT NOT NULL,
        score REAL NOT NULL,
        report_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (record_id, source)
    );
    """,
    # 13: reports stored before came from a person or with an imported conversation; the person's score wins.
    _report_sources,
    # 14: the release index holds only the records tagged with a release, the only ones its readers ask for
    # (`release = ?`, `release IN (…)`): committing an untagged exchange writes one index page fewer.
    """
    DROP INDEX records_by_harness_release_time;
    CREATE INDEX records_by_harness_release_time
        ON records (scenario, json_extract(tags, '$.release'), created_at, score)
        WHERE type = 'inference' AND json_extract(tags, '$.release') IS NOT NULL;
    """,
    # 15: the listings by type hold only the records clients post (reports, requests): an exchange's commit, the
    # proxy's, writes two index pages fewer. Inference records are read by scenario (`records_by_scenario`) or in
    # sequence order, where nearly every row is one; a query for client records says `type != 'inference'` so
    # that both engines' planners use these (`of_types`).
    """
    DROP INDEX records_by_type;
    DROP INDEX records_by_scenario_type;
    CREATE INDEX client_records_by_type ON records (type, sequence) WHERE type != 'inference';
    CREATE INDEX client_records_by_scenario_type ON records (scenario, type, sequence) WHERE type != 'inference';
    """,
    # 16: the unscored exchanges of every scenario are read from each scenario's own (`records_unscored_by_scenario`,
    # merged in records._unscored_everywhere), so no index holds them all: an exchange's commit writes one fewer.
    "DROP INDEX records_unscored;",
    # 17: the derived sources a scenario stopped counting (their agreement with people fell too low: distrusted 1),
    # or that a person turned back on (0, never distrusted again by itself); people's scores indexed on their own,
    # so that agreement reads them without reading every derived one.
    """
    CREATE TABLE source_trust (
        scenario TEXT NOT NULL,
        source TEXT NOT NULL,
        distrusted INTEGER NOT NULL,
        reason TEXT NOT NULL,
        changed_at REAL NOT NULL,
        PRIMARY KEY (scenario, source)
    );
    CREATE INDEX record_scores_of_people ON record_scores (record_id) WHERE source = 'person';
    """,
)


def migrate(conn: Connection, engine: Engine) -> int:
    """Apply the migrations the database has not seen yet, in one transaction (under a lock several daemons
    share); returns the schema version. A database newer than this code is refused, untouched."""
    engine.begin_migration(conn)
    try:
        engine.prepare(conn)
        version = engine.schema_version(conn)
        if version > len(MIGRATIONS):
            raise StoreUnavailable(
                f"the database ({engine.describe()}) has schema version {version}, newer than this reef"
                f" ({len(MIGRATIONS)}); upgrade reef"
            )
        for number in range(version + 1, len(MIGRATIONS) + 1):
            migration = MIGRATIONS[number - 1]
            if isinstance(migration, str):
                for statement in _statements(migration):
                    conn.execute(engine.ddl(statement))
            else:
                migration(conn)
            engine.set_schema_version(conn, number)
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return len(MIGRATIONS)


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]
