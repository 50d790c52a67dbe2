"""Package boundaries: the adapters and the harness tree stand apart from the daemon; the CLI, the TUI and the
wrappers know the daemon only through its contract and the client package, which itself imports only the contract;
a recipe, built-in or not, is written from the recipe interface alone; the records layer sits below the proxy and
the store; and the daemon and the recipes spell wire names only through the contract."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REEF_PACKAGES = ("reef_contract", "reef_daemon", "reef_client", "reef_cli", "reef_tui", "reef_harness",
                 "reef_transcripts", "recipes", "adapters")  # fmt: skip
HTTP_CLIENTS = ("httpx", "httpx_sse", "aiohttp", "requests", "urllib.request", "http.client")


def imports(path: Path) -> set[str]:
    """The modules a source file imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def reef_imports(path: Path) -> set[str]:
    """The modules of reef's own packages that a source file imports."""
    return {name for name in imports(path) if name.split(".")[0] in REEF_PACKAGES}


def sources(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("package", ["adapters", "reef_harness"])
def test_adapters_and_the_tree_import_only_the_contract_from_the_daemon(package: str) -> None:
    for path in sources(package):
        daemon_parts = {name for name in reef_imports(path) if name.startswith("reef_daemon")}
        assert daemon_parts <= {"reef_contract"}, f"{path.relative_to(ROOT)} imports {sorted(daemon_parts)}"


def test_the_contract_imports_no_other_part_of_reef() -> None:
    for path in sources("reef_contract"):
        others = {name for name in reef_imports(path) if not name.startswith("reef_contract")}
        assert others == set(), f"{path.relative_to(ROOT)} imports {sorted(others)}"


def test_the_test_recipe_needs_only_the_recipe_interface() -> None:
    assert reef_imports(ROOT / "tests" / "support" / "counting_recipe.py") == {"reef_daemon.recipe_api"}


# Wire names: a header of reef's, a route, or a REEF_* environment variable, spelled as a string.
WIRE_NAME = re.compile(r"(?i:x-reef-)|(?<![\w/])/reef/|/v1/|/healthz|\bREEF_[A-Z0-9_]")
# Strings that look like wire names and are not the contract's: a heredoc delimiter in the install script, and
# the proposer's jail tools, which run as a plain file with the standard library only and cannot import reef.
NOT_WIRE_NAMES = {
    ("reef_daemon/harness/install/script.py", "REEF_EOF_"),
    ("recipes/reefine/agent_tools.py", "REEF_STEP_URL"),
    ("recipes/reefine/agent_tools.py", "REEF_STEP_TOKEN"),
}
# OTLP's own path, which reef adds to a collector's base URL: a wire name of OpenTelemetry's, not reef's.
NOT_WIRE_NAMES |= {
    ("reef_daemon/telemetry/_provider.py", "/v1/traces"),
    ("reef_daemon/setting_kinds.py", "expected the collector's base http:// or https:// URL (reef adds /v1/traces)"),
}


def wire_names_spelled(path: Path) -> list[str]:
    """The string literals of a source file (docstrings aside) that spell a wire name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and WIRE_NAME.search(node.value)
    ]


@pytest.mark.parametrize("package", ["reef_daemon", "recipes"])
def test_wire_names_are_spelled_only_in_the_contract(package: str) -> None:
    # The API reference writes the wire down for people (docs/api.md): its prose names routes and headers.
    reference = ROOT / "reef_daemon" / "api_reference.py"
    spelled = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if path == reference:
            continue
        where = path.relative_to(ROOT).as_posix()
        spelled += [f"{where}: {text!r}" for text in wire_names_spelled(path) if (where, text) not in NOT_WIRE_NAMES]
    assert spelled == [], "use the constants of reef_contract instead"


def test_the_scan_finds_a_wire_name(tmp_path: Path) -> None:
    source = tmp_path / "route.py"
    source.write_text('"""Serves /reef/status."""\nROUTE = "/reef/status"\nHEADER = "X-Reef-Scenario"\n')
    assert wire_names_spelled(source) == ["/reef/status", "X-Reef-Scenario"]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("reef_daemon/records", ("reef_daemon.proxy", "reef_daemon.store")),
        ("reef_daemon/store", ("reef_daemon.proxy",)),
    ],
)
def test_records_stand_below_the_proxy_and_the_store(package: str, forbidden: tuple[str, ...]) -> None:
    """Answers, previews and summaries are derived in the records layer, which both the proxy and the store import:
    it imports neither, and the store does not import the proxy."""
    paths = sorted((ROOT / package).rglob("*.py"))
    assert paths
    for path in paths:
        crossing = {name for name in reef_imports(path) if name.split(".")[:2] in [p.split(".") for p in forbidden]}
        assert not crossing, f"{path.relative_to(ROOT)} imports {sorted(crossing)}"


def test_the_client_package_imports_only_the_contract() -> None:
    for path in sources("reef_client"):
        outside = {name for name in reef_imports(path) if name.split(".")[0] != "reef_client"}
        assert outside <= {"reef_contract"}, f"{path.relative_to(ROOT)} imports {sorted(outside)}"


@pytest.mark.parametrize("package", ["reef_tui", "adapters/wrapper"])
def test_the_tui_and_the_wrappers_know_the_daemon_only_through_the_contract_and_the_client(package: str) -> None:
    for path in sources(package):
        found = reef_imports(path)
        daemon_parts = {name for name in found if name.startswith("reef_daemon")}
        assert daemon_parts <= {"reef_contract"}, f"{path.relative_to(ROOT)} imports {sorted(daemon_parts)}"
        cli_parts = {name for name in found if name.split(".")[0] == "reef_cli"}
        assert not cli_parts, f"{path.relative_to(ROOT)} imports {sorted(cli_parts)} (shared parts go in reef_client)"


def test_only_the_client_package_speaks_http_to_the_daemon() -> None:
    for path in sources("reef_cli", "reef_tui", "adapters"):
        http = {name for name in imports(path) if name.split(".")[0] in HTTP_CLIENTS or name in HTTP_CLIENTS}
        assert not http, f"{path.relative_to(ROOT)} imports {sorted(http)}; the daemon's client is reef_client"


def test_the_client_package_is_used_through_its_public_face() -> None:
    for path in sources("reef_cli", "reef_tui", "adapters", "tests", "bench"):
        private = {name for name in reef_imports(path) if name.startswith("reef_client") and "._" in name}
        assert not private, f"{path.relative_to(ROOT)} imports {sorted(private)}; import them from reef_client"


# setting_kinds: the settings' vocabulary alone, so a recipe's settings are known without loading the toolkit.
RECIPE_FACES = {"reef_daemon.recipe_api", "reef_daemon.setting_kinds", "reef_contract"}


def test_the_built_in_recipes_import_only_the_recipe_interface_and_the_contract_from_the_daemon() -> None:
    paths = sorted((ROOT / "recipes").rglob("*.py"))
    assert paths, "no recipes found"
    for path in paths:
        daemon_parts = {
            name for name in reef_imports(path) if name.split(".")[0] in ("reef_daemon", "reef_cli", "reef_tui")
        }
        assert daemon_parts <= RECIPE_FACES, f"{path.relative_to(ROOT)} imports {sorted(daemon_parts - RECIPE_FACES)}"


def test_the_boundary_scan_sees_imports_inside_functions_too(tmp_path: Path) -> None:
    source = tmp_path / "late.py"
    source.write_text("def f():\n    from reef_daemon.store import Store\n    import reef_daemon.settings\n")
    assert reef_imports(source) == {"reef_daemon.store", "reef_daemon.settings"}


def test_a_recipe_is_lent_the_daemons_store_and_gate_through_the_interface_s_views(tmp_path: Path) -> None:
    # mypy holds the daemon's parts to the views where app.py builds the context; here: they work through them.
    from reef_daemon.auth import TokenGate
    from reef_daemon.recipe_api import StoreView, TokenLender
    from reef_daemon.store import Store

    store: StoreView = Store(tmp_path, lambda events: None, score_scale={"min": 0.0, "max": 1.0})
    assert store.score_scale == {"min": 0.0, "max": 1.0}
    gate: TokenLender = TokenGate(["daemon-token"])
    with gate.lend("trial") as token:
        assert token is not None and token != "daemon-token"


def test_the_closest_name_is_found_in_one_place() -> None:
    # Settings, recipes and scenarios name what was meant in the same words: through the contract's did_you_mean.
    spelled = [str(path.relative_to(ROOT)) for path in sources(*REEF_PACKAGES)
               if "get_close_matches" in path.read_text(encoding="utf-8")]  # fmt: skip
    assert spelled == ["reef_contract/_words.py"]
