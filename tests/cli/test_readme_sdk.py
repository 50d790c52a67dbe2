"""The README's SDK snippet runs as written against a daemon (fake upstream behind it), and every receipt it reads
names a stored record of the route it called."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from reef_contract import DEFAULT_PORT
from tests.support.cli_testing import Daemon

README = Path(__file__).resolve().parents[2] / "README.md"
RECEIPT_LINE = re.compile(r"^(\s*)receipt = (.+)$", re.MULTILINE)


def test_the_readme_sdk_snippet_reads_a_receipt_for_every_call(daemon: Daemon) -> None:
    snippet = re.search(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert snippet is not None
    code = snippet.group(1).replace("http://127.0.0.1:8900", daemon.url)
    # Every receipt the snippet reads is kept and printed, instead of only the last.
    code = "receipts = []\n" + RECEIPT_LINE.sub(r"\1receipts.append(\2)", code) + "print(*receipts)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    receipts = done.stdout.split()[-6:]
    routes = [daemon.record(receipt)["route"] for receipt in receipts]
    assert routes == ["/v1/chat/completions"] * 2 + ["/v1/responses"] * 2 + ["/v1/messages"] * 2
    assert len(set(receipts)) == 6


def test_the_readme_talks_to_the_daemon_where_reef_serve_listens() -> None:
    # No `reef serve` in the README names a port, so every reef address it uses is the default one or, in the
    # reefine section, the reefine profile's; others are the upstream model's (11434).
    from recipes.reefine.recipe import ReefineRecipe

    text = README.read_text()
    assert "--port" not in text
    reefine_port = str(ReefineRecipe.profile["reef.port"])
    addresses = set(re.findall(r"http://127\.0\.0\.1:(\d+)", text)) - {"11434"}
    assert addresses == {str(DEFAULT_PORT), reefine_port}
    reefine = text.split("### Improve the harness (reefine)", 1)[1].split("\n### ", 1)[0]
    assert set(re.findall(r"http://127\.0\.0\.1:(\d+)", reefine)) - {"11434"} == {reefine_port}
    assert f"listens on {reefine_port}" in reefine
