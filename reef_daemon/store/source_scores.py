"""A record's score as told by some report sources only (`reports.sources`): the score of the first of those sources
in precedence that scored it (`record_scores`) and that its scenario trusts (store/source_trust.py), or the record's
own `score` column when every source counts (it holds the first trusted source's already)."""

from __future__ import annotations

from collections.abc import Collection

from reef_contract import REPORT_SOURCES
from reef_daemon.store.engines.schema import SOURCE_RANK
from reef_daemon.store.source_trust import distrusted_in


def score_of(sources: Collection[str], record: str = "records") -> str:
    """An SQL expression for the score of the record row `record` counting only `sources`. The sources are the
    contract's own words (settings check them), so they are written into the SQL; anything else counts as none."""
    if set(REPORT_SOURCES) <= set(sources):
        return f"{record}.score"
    chosen = ", ".join(f"'{source}'" for source in REPORT_SOURCES if source in sources) or "NULL"
    return (
        f"(SELECT score FROM record_scores WHERE record_id = {record}.id AND source IN ({chosen})"  # noqa: S608
        f" AND source NOT IN ({distrusted_in(f'{record}.scenario')}) ORDER BY {SOURCE_RANK} LIMIT 1)"
    )
