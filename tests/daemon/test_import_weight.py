"""The `reef` command and a daemon in front of an upstream stay light: torch loads only for the embedded model
and the weight recipes (it costs about a second and 200 MB)."""

from __future__ import annotations

import subprocess
import sys


def test_cli_and_recording_daemon_do_not_import_torch() -> None:
    probe = (
        "import sys, reef_cli.app, reef_daemon.app\n"
        "from reef_daemon.recipe_host import resolve_recipe\n"
        "resolve_recipe('record'); resolve_recipe('reefine')\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'textual') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
