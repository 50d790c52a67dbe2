"""The sglang engine's parts that need no server: reading SGLang's stream events, the request it sends, the
launch command, refusals at start, and the checkpoint folder a swap writes."""

from __future__ import annotations

import itertools
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from reef_daemon.runtimes.embedded.engines import build_engine
from reef_daemon.runtimes.embedded.sampling import SamplingParams
from reef_daemon.runtimes.embedded.sglang import launch, protocol
from reef_daemon.runtimes.embedded.sglang.weights import write_updated
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import load_settings


def event(ids: list[int], total: int, **meta: Any) -> dict[str, Any]:
    logprobs = [[-0.5 - i, token, None] for i, token in enumerate(ids)]
    return {"output_ids": ids, "meta_info": {"completion_tokens": total, "output_token_logprobs": logprobs, **meta}}


def test_cumulative_and_incremental_events_give_the_same_new_tokens() -> None:
    cumulative = protocol.new_tokens(event([5, 6, 7], 3, weight_version="a:1"), seen=1)
    incremental = protocol.new_tokens(event([6, 7], 3, weight_version="a:1"), seen=1)
    assert [t.id for t in cumulative] == [t.id for t in incremental] == [6, 7]
    assert {t.version for t in cumulative} == {"a:1"}


def test_per_token_version_spans_win_over_the_event_version() -> None:
    spans = [{"version": "a:1", "start": 0, "end": 2}, {"version": "a:2", "start": 2, "end": 4}]
    tokens = protocol.new_tokens(event([1, 2, 3, 4], 4, weight_version="a:2", weight_versions=spans), seen=0)
    assert [t.version for t in tokens] == ["a:1", "a:1", "a:2", "a:2"]


def test_a_log_prob_for_another_token_is_refused() -> None:
    bad = {"output_ids": [9], "meta_info": {"completion_tokens": 1, "output_token_logprobs": [[-1.0, 8, None]]}}
    with pytest.raises(ValueError, match="not for token 9"):
        protocol.new_tokens(bad, seen=0)


def test_generate_request_uses_sglang_field_names() -> None:
    params = SamplingParams(max_tokens=50, temperature=1.0, top_p=0.9, seed=7)
    body = protocol.generate_body([1, 2, 3], params, max_new_tokens=20)
    assert body["input_ids"] == [1, 2, 3] and body["return_logprob"] is True and body["stream"] is True
    assert body["sampling_params"] == {
        "max_new_tokens": 20,
        "temperature": 1.0,
        "top_p": 0.9,
        "skip_special_tokens": True,
        "sampling_seed": 7,
    }


def test_update_from_disk_never_aborts_requests() -> None:
    body = protocol.update_from_disk_body("/w/v000001", "inc:1")
    assert body["model_path"] == "/w/v000001" and body["weight_version"] == "inc:1"
    assert body["abort_all_requests"] is False


def test_launch_command_has_the_flags_reef_relies_on(tmp_path: Path) -> None:
    settings = load_settings(overrides={"embedded.sglang-port": "31000", "embedded.sglang-tp": "2"}, environ={})
    plan = launch.plan_launch(tmp_path / "model", "inc:0", settings.embedded, tmp_path / "state")
    argv = list(plan.argv)
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    flags = dict(itertools.pairwise(argv))
    assert flags["--model-path"] == str(tmp_path / "model") and flags["--port"] == "31000"
    assert flags["--tp-size"] == "2" and flags["--weight-version"] == "inc:0" and flags["--host"] == "127.0.0.1"
    assert "--incremental-streaming-output" in argv and "--disable-radix-cache" in argv
    assert plan.url == "http://127.0.0.1:31000"


def test_launching_without_a_model_folder_is_refused_with_what_to_set(tmp_path: Path) -> None:
    settings = load_settings(overrides={"embedded.engine": "sglang", "reef.state-dir": str(tmp_path)}, environ={})
    with pytest.raises(SettingsError, match=r"inference\.model-path.*--embedded\.sglang-url"):
        build_engine(settings)


def test_launching_without_sglang_installed_says_what_to_install(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    settings = load_settings(
        overrides={"embedded.engine": "sglang", "inference.model-path": str(tmp_path), "reef.state-dir": str(tmp_path)},
        environ={},
    )
    with pytest.raises(
        SettingsError, match=r"needs SGLang, which is not installed; .*pip install -e '\.\[embedded,gpu\]'"
    ):
        build_engine(settings)


def test_a_swap_folder_replaces_only_the_named_tensors(tmp_path: Path) -> None:
    current = tmp_path / "current"
    current.mkdir()
    save_file({"a": torch.ones(2, dtype=torch.bfloat16), "b": torch.zeros(3)}, str(current / "model.safetensors"))
    (current / "config.json").write_text("{}")
    written = write_updated(current, {"a": torch.full((2,), 3.0)}, tmp_path / "v1")
    tensors = load_file(str(written / "model.safetensors"))
    assert tensors["a"].dtype == torch.bfloat16 and tensors["a"].tolist() == [3.0, 3.0]
    assert tensors["b"].tolist() == [0.0, 0.0, 0.0] and (written / "config.json").is_file()
    with pytest.raises(ValueError, match="shape"):
        write_updated(current, {"a": torch.ones(5)}, tmp_path / "v2")
    with pytest.raises(KeyError, match="no weights named c"):
        write_updated(current, {"c": torch.ones(1)}, tmp_path / "v3")
    assert not (tmp_path / "v2").exists() and not (tmp_path / "v3").exists()


def test_reef_serve_refuses_a_missing_sglang_with_what_to_install_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    args = ["--embedded.engine", "sglang", "--inference.model-path", str(tmp_path / "model")]
    result = serve(tmp_path, *args)
    assert result.returncode == 2
    assert "needs SGLang, which is not installed; install the GPU extra" in result.stderr
    assert "Traceback" not in result.stderr


def test_reef_serve_refuses_an_unreachable_sglang_server_without_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    args = ["--embedded.engine", "sglang", "--embedded.sglang-url", f"http://127.0.0.1:{port}"]
    result = serve(tmp_path, *args, "--embedded.sglang-start-timeout-s", "0.5")
    assert result.returncode == 2, result.stderr
    assert f"the sglang engine did not start: the SGLang server at http://127.0.0.1:{port} was not healthy" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "reef_cli", "serve", "--reef.port", "0", "--reef.state-dir", str(tmp_path / "s")]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, check=False)
