"""The store's engines and their mechanics: a connection's protocol and the SQLite engine (`engine`), PostgreSQL
(`postgres`), which one a URL opens (`opening`), the schema and its migrations, the group-commit writer, readers,
WAL checkpoints, following another daemon's commits, leases, the state directory's owner, and copying a store from
one engine to another. Knows no table's meaning; the tables (`reef_daemon.store`) use these."""
