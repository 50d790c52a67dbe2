"""The client package, the TUI and the wrappers depend on the daemon only through the wire contract (reef_contract),
so they run without any of the daemon's modules, its server stack (aiohttp), a model runtime (torch) or the `reef`
command's own modules loaded."""

from __future__ import annotations

import json
import subprocess
import sys

LOADED = (
    "import json, pkgutil, sys\n"
    "import reef_client, reef_client.render, reef_tui.app, adapters.wrapper.cli\n"
    "for module in pkgutil.iter_modules(reef_client.render.__path__, 'reef_client.render.'):\n"
    "    __import__(module.name)\n"
    "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('reef_daemon', 'reef_cli', 'aiohttp',"
    " 'torch'))))\n"
)


def test_the_client_the_tui_and_the_wrappers_load_nothing_of_the_daemon() -> None:
    done = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True, check=True, timeout=120)
    loaded = json.loads(done.stdout)
    assert loaded == [], loaded
