"""Which engine a store opens: SQLite under the state directory or at a path, or a PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

from reef_daemon.store.engines.engine import ANSWER_WAIT_S, DATABASE_NAME, Engine


def open_engine(
    url: str | None, state_dir: Path, *, flush: bool = False, answer_wait_s: float = ANSWER_WAIT_S
) -> Engine:
    """The engine for `store.url`: PostgreSQL for a `postgresql://` URL, `sqlite:PATH` for that file, and no URL
    for the SQLite file under the state directory. `flush` (`store.flush`): a commit returns once it is on disk.
    `answer_wait_s` (`store.timeout-s`): how long a server's answer is waited for."""
    if url is None or not url.strip():
        state_dir.mkdir(parents=True, exist_ok=True)
        return Engine(str(state_dir / DATABASE_NAME), flush=flush)
    url = url.strip()
    if url.startswith(("postgresql://", "postgres://")):
        from reef_daemon.store.engines.postgres import PostgresEngine

        return PostgresEngine(url, flush=flush, answer_wait_s=answer_wait_s)
    if url.startswith("sqlite:"):
        path = Path(url.removeprefix("sqlite:").removeprefix("//")).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        return Engine(str(path), flush=flush)
    raise ValueError("expected a postgresql://… URL or sqlite:PATH")
