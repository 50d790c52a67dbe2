"""The client and the TUI depend on the daemon only through its wire contract, so they run without the daemon's
server stack (aiohttp) or a model runtime (torch) loaded."""

from __future__ import annotations

import json
import subprocess
import sys

LOADED = (
    "import json, sys\n"
    "import reef_cli.client, reef_tui.app\n"
    "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('reef_daemon', 'aiohttp', 'torch'))))\n"
)


def test_the_client_and_the_tui_load_only_the_contract_of_the_daemon() -> None:
    done = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True, check=True, timeout=120)
    loaded = json.loads(done.stdout)
    assert loaded[:2] == ["reef_daemon", "reef_daemon.contract"], loaded
    assert all(name.startswith("reef_daemon.contract._") for name in loaded[2:]), loaded  # the contract's own modules
