"""The test suite's tiers, and the fixtures every folder shares (tests/support/fixtures.py).

A test is marked from the fixtures it uses, directly or through other fixtures, and from the process starters its
module imports (`PROCESS_STARTERS`), so a mark cannot be forgotten:
`model` for the embedded model, `agent` for a real agent CLI, `process` for a daemon run as its own process,
`postgres` for the throwaway PostgreSQL server (scripts/setup installs it; without it those tests fail, not skip;
`store_url` runs a test on each engine and marks its PostgreSQL run).
`scripts/test --fast` runs what needs neither a model nor an agent. Tests that share a module-scoped fixture (one
daemon for the module) are kept on one xdist worker (`--dist loadgroup`), so each module starts its daemon once.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.support.fixtures"]

TIERS = {
    "model": ("the embedded model (SmolLM2-135M on the CPU)", {"embedded_models"}),
    "agent": ("a real agent CLI (pi, codex, claude, opencode, dsh)", {"agent_cli"}),
    "process": (
        "a daemon run as a process of its own",
        {"daemon", "other_daemon", "reefine_daemon", "tests/adapters::reefine", "shared_reefine"},
    ),
    "postgres": ("a PostgreSQL server the tests start (initdb in a temporary folder)", {"postgres_server"}),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="the engine of the in-process daemons' store (start_reef): postgres gives each test a fresh database on "
        "the throwaway server",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sqlite_file: the test reads the daemon's SQLite file itself, so it keeps SQLite under --store"
    )
    for name, (meaning, _fixtures) in TIERS.items():
        config.addinivalue_line("markers", f"{name}: the test needs {meaning}")


# What starts a daemon process without a fixture: a module that imports one of these has its tests marked `process`.
PROCESS_STARTERS = ("start_daemon", "DaemonProcess")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = fixtures_used(item)
        for name, (_meaning, fixtures) in TIERS.items():
            if used.keys() & fixtures:
                item.add_marker(name)
        module = getattr(item, "module", None)
        if any(hasattr(module, starter) for starter in PROCESS_STARTERS):
            item.add_marker("process")
        if any(definition.scope in ("module", "package") for definition in used.values()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def fixtures_used(item: pytest.Item) -> dict[str, pytest.FixtureDef[object]]:
    """The fixtures a test uses, directly or through others, by name and by `folder::name` (where two folders
    define fixtures of one name), with the definition that serves it."""
    info = getattr(item, "_fixtureinfo", None)
    used: dict[str, pytest.FixtureDef[object]] = {}
    for name, definitions in info.name2fixturedefs.items() if info else ():
        used[name] = definitions[-1]
        if definitions[-1].baseid:
            used[f"{definitions[-1].baseid}::{name}"] = definitions[-1]
    return used
