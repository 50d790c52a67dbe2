"""Sources you can trust: per scenario, how each derived source agrees with people's scores on the records both
scored, and which sources stop counting for it.

Agreement is Cohen's κ on low/high (a score below the middle of the scale is low): chance-corrected, so a source
that calls nearly everything high gains nothing from people doing the same. Once a source shares `min_records`
records with people in a scenario and its κ falls below `min_agreement`, it is distrusted there (`source_trust`,
a `source` event that says why), and every record it scored takes its score from the next source in precedence, or
none (`rescore`): training, live scores, canaries and the gate's tasks all read that score. A person turns a
source back on (`enable`); it is then never distrusted again by itself in that scenario.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from reef_contract import SOURCE_EVENT, ScoreScale, SourceAgreement, low_score_below
from reef_daemon.reports.agreement import Agreement, kappa
from reef_daemon.store.engines.engine import Connection
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.schema import SOURCE_RANK
from reef_daemon.store.engines.writer import GroupCommitWriter, WriteContext


def distrusted_in(scenario: str) -> str:
    """SQL for the sources distrusted in the scenario that the SQL expression `scenario` names, for `source NOT IN
    (…)`."""
    return f"SELECT source FROM source_trust WHERE scenario = {scenario} AND distrusted = 1"  # noqa: S608


# Each shared record of a scenario: the person's score and one derived source's (over the person scores' index).
# The scenario is a scalar subquery, not a join, so that no plan reads every record of the scenario instead.
_SHARED = (
    "SELECT other.source AS source, person.score AS person, other.score AS other FROM record_scores AS person"
    " JOIN record_scores AS other ON other.record_id = person.record_id AND other.source != 'person'"
    " WHERE person.source = 'person' AND (SELECT scenario FROM records WHERE id = person.record_id) = ?"
)
# The best score of a record from the sources its scenario trusts.
_BEST_TRUSTED = (
    "SELECT score, source FROM record_scores WHERE record_id = ?"  # noqa: S608 - constants
    f" AND source NOT IN ({distrusted_in('(SELECT scenario FROM records WHERE id = ?)')})"
    f" ORDER BY {SOURCE_RANK} LIMIT 1"
)


@dataclass(frozen=True)
class TrustPolicy:
    """When a derived source stops counting: κ below `min_agreement` over at least `min_records` shared records."""

    min_agreement: float = 0.2
    min_records: int = 20


def rescore(conn: Connection, record_id: str) -> None:
    """Give a record the score of the first source in precedence that scored it and that its scenario trusts; none
    when every source that scored it is distrusted."""
    best = conn.execute(_BEST_TRUSTED, (record_id, record_id)).fetchone()
    if best is not None:
        conn.execute(
            "UPDATE records SET score = ?, source = ? WHERE id = ? AND type = 'inference'",
            (best["score"], best["source"], record_id),
        )
    elif conn.execute("SELECT 1 FROM record_scores WHERE record_id = ?", (record_id,)).fetchone() is not None:
        conn.execute("UPDATE records SET score = NULL, source = NULL WHERE id = ? AND type = 'inference'", (record_id,))


class SourceTrust:
    def __init__(self, writer: GroupCommitWriter, reader: Reader, policy: TrustPolicy, scale: ScoreScale) -> None:
        self._writer = writer
        self._reader = reader
        self._policy = policy
        self._low_below = low_score_below(scale)

    async def agreements(self) -> dict[str, dict[str, SourceAgreement]]:
        """Per scenario with people's scores (or a source switched off or on), each derived source's agreement."""
        return await self._reader.run(self._read_all)

    async def distrusted(self, scenario: str) -> dict[str, str]:
        """The sources distrusted in `scenario`, each with why."""

        def read(conn: Connection) -> dict[str, str]:
            rows = conn.execute(
                "SELECT source, reason FROM source_trust WHERE scenario = ? AND distrusted = 1", (scenario,)
            ).fetchall()
            return {str(row["source"]): str(row["reason"]) for row in rows}

        return await self._reader.run(read)

    async def enable(self, scenario: str, source: str) -> SourceAgreement:
        """Count `source` in `scenario` again, for good: its records take their scores from it again."""

        def write(ctx: WriteContext) -> SourceAgreement:
            reason = "a person turned it back on"
            ctx.conn.execute(
                "INSERT INTO source_trust (scenario, source, distrusted, reason, changed_at) VALUES (?,?,0,?,?)"
                " ON CONFLICT (scenario, source) DO UPDATE SET distrusted = 0, reason = excluded.reason,"
                " changed_at = excluded.changed_at",
                (scenario, source, reason, time.time()),
            )
            _rescore_source(ctx.conn, scenario, source)
            agreement = self._read_scenario(ctx.conn, scenario).get(source) or _agreement(Agreement(0, None), reason)
            ctx.record_event(
                SOURCE_EVENT,
                scenario,
                {"action": "enabled", "source": source, "agreement": agreement, "reason": reason},
            )
            return agreement

        return await self._writer.submit(write)

    def review(self, ctx: WriteContext, scenario: str, references: list[str]) -> None:
        """After scores were given to `references` in the caller's transaction: when one of them now has a person's
        score beside a derived one, distrust each derived source of the scenario whose agreement fell too low."""
        marks = ",".join("?" * len(references))
        shared = ctx.conn.execute(
            f"SELECT 1 FROM record_scores WHERE record_id IN ({marks}) AND source = 'person' AND EXISTS"  # noqa: S608
            " (SELECT 1 FROM record_scores AS other WHERE other.record_id = record_scores.record_id"
            " AND other.source != 'person') LIMIT 1",
            references,
        ).fetchone()
        if shared is None:
            return
        policy = self._policy
        for source, agreement in self._read_scenario(ctx.conn, scenario).items():
            value = agreement["kappa"]
            if not agreement["counts"] or agreement["reason"] is not None:  # distrusted, or a person's call
                continue
            if agreement["shared"] < policy.min_records or value is None or value >= policy.min_agreement:
                continue
            reason = (
                f"its agreement with people's scores is κ {value:.2f} on {agreement['shared']} shared records, below"
                f" reports.min-agreement {policy.min_agreement:g}; `reef sources enable {source} --scenario"
                f" {scenario}` counts it again"
            )
            ctx.conn.execute(
                "INSERT INTO source_trust (scenario, source, distrusted, reason, changed_at) VALUES (?,?,1,?,?)",
                (scenario, source, reason, time.time()),
            )
            _rescore_source(ctx.conn, scenario, source)
            shown: SourceAgreement = {"shared": agreement["shared"], "kappa": value, "counts": False, "reason": reason}
            ctx.record_event(
                SOURCE_EVENT,
                scenario,
                {"action": "distrusted", "source": source, "agreement": shown, "reason": reason},
            )

    def _read_all(self, conn: Connection) -> dict[str, dict[str, SourceAgreement]]:
        scenarios = {
            str(row["scenario"])
            for row in conn.execute(
                "SELECT DISTINCT (SELECT scenario FROM records WHERE id = record_scores.record_id) AS scenario"
                " FROM record_scores WHERE source = 'person' UNION SELECT scenario FROM source_trust"
            ).fetchall()
        }
        return {scenario: found for scenario in sorted(scenarios) if (found := self._read_scenario(conn, scenario))}

    def _read_scenario(self, conn: Connection, scenario: str) -> dict[str, SourceAgreement]:
        pairs: dict[str, list[tuple[bool, bool]]] = {}
        for row in conn.execute(_SHARED, (scenario,)).fetchall():
            pairs.setdefault(str(row["source"]), []).append(
                (float(row["person"]) >= self._low_below, float(row["other"]) >= self._low_below)
            )
        decided = {
            str(row["source"]): (bool(row["distrusted"]), str(row["reason"]))
            for row in conn.execute(
                "SELECT source, distrusted, reason FROM source_trust WHERE scenario = ?", (scenario,)
            ).fetchall()
        }
        shown: dict[str, SourceAgreement] = {}
        for source in sorted(set(pairs) | set(decided)):
            distrusted, reason = decided.get(source, (False, None))
            agreement = _agreement(kappa(pairs.get(source, [])), reason)
            shown[source] = {**agreement, "counts": not distrusted}
        return shown


def _agreement(agreement: Agreement, reason: str | None) -> SourceAgreement:
    return {"shared": agreement.shared, "kappa": agreement.kappa, "counts": True, "reason": reason}


def _rescore_source(conn: Connection, scenario: str, source: str) -> None:
    """Rescore every record of `scenario` that `source` scored (after it was distrusted there, or trusted again)."""
    rows = conn.execute(
        "SELECT record_scores.record_id AS id FROM record_scores JOIN records ON records.id = record_scores.record_id"
        " WHERE record_scores.source = ? AND records.scenario = ?",
        (source, scenario),
    ).fetchall()
    for row in rows:
        rescore(conn, str(row["id"]))
