"""Agents installed by scripts/setup are found off PATH: in the checkout's `.tools/node_modules/.bin` and beside
reef's Python; when none is found, the message names every place reef looked."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from adapters import _locate, find_agent, not_found

REPO = Path(__file__).resolve().parents[2]


def test_the_checkout_tools_folder_is_the_one_setup_installs_into() -> None:
    assert _locate.CHECKOUT_AGENTS == REPO / ".tools" / "node_modules" / ".bin"


def test_an_agent_in_the_checkout_tools_is_found_when_path_lacks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    agent = tools / "some-agent"
    agent.write_text("#!/bin/sh\n")
    agent.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(_locate, "CHECKOUT_AGENTS", tools)
    assert find_agent("some-agent") == str(agent)
    assert find_agent("other-agent") is None
    message = not_found("other-agent", "npm install -g other")
    assert f"looked on PATH and in {Path(os.path.abspath(sys.executable)).parent}, {tools}" in message
    assert "(npm install -g other) or run scripts/setup" in message
