"""Starting an SGLang server for the embedded runtime, and refusing, with what to install, when it cannot run here.

The server is `python -m sglang.launch_server` on `inference.model-path` (a local Hugging Face folder), bound to
loopback, with the flags reef's generation relies on: `--weight-version` (the first version reef stamps),
`--incremental-streaming-output` (events carry only new tokens) and `--disable-radix-cache` (no prefix computed by
older weights is ever reused after an update). Its output goes to `<state>/logs/sglang.log`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from reef_daemon.runtimes.embedded.sglang.protocol import HEALTH
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import EmbeddedSection

GPU_INSTALL_HINT = "install the GPU extra on a CUDA machine: pip install -e '.[embedded,gpu]'"
HEALTH_POLL_S = 1.0


@dataclass(frozen=True)
class LaunchPlan:
    """The server reef starts: its command line, URL and log file."""

    argv: tuple[str, ...]
    url: str
    log_file: Path


HOST = "127.0.0.1"


def local_url(port: int) -> str:
    """The URL of the server reef launches on `port`."""
    return f"http://{HOST}:{port}"


@dataclass(frozen=True)
class LoraLaunch:
    """SGLang's LoRA serving (`--enable-lora`): the largest rank, the adapted modules, adapters per batch."""

    max_rank: int
    target_modules: tuple[str, ...]
    max_per_batch: int = 8


def plan_launch(
    model_path: Path, version: str, embedded: EmbeddedSection, state_dir: Path, lora: LoraLaunch | None = None
) -> LaunchPlan:
    """The command line of the SGLang server reef launches (serving LoRA adapters, loaded by name at run time,
    when `lora` is given)."""
    argv: tuple[str, ...] = (
        sys.executable, "-m", "sglang.launch_server",
        "--model-path", str(model_path),
        "--host", HOST,
        "--port", str(embedded.sglang_port),
        "--tp-size", str(embedded.sglang_tp),
        "--mem-fraction-static", str(embedded.sglang_mem_fraction),
        "--weight-version", version,
        "--incremental-streaming-output",
        "--disable-radix-cache",
    )  # fmt: skip
    if lora is not None:
        argv += (
            "--enable-lora",
            "--max-lora-rank", str(lora.max_rank),
            "--lora-target-modules", *lora.target_modules,
            "--max-loras-per-batch", str(lora.max_per_batch),
        )  # fmt: skip
    return LaunchPlan(argv, local_url(embedded.sglang_port), state_dir / "logs" / "sglang.log")


def check_launchable(model_path: Path | None) -> Path:
    """The model folder to launch SGLang on; SettingsError saying what is missing (a model folder, SGLang, a CUDA
    GPU) otherwise."""
    if model_path is None or not (model_path / "config.json").is_file():
        raise SettingsError(
            "embedded.engine = sglang launches SGLang on inference.model-path, a local Hugging Face model folder"
            f" (with config.json); {'none is set' if model_path is None else f'{model_path} is not one'}."
            " Set it, or attach to a running server with --embedded.sglang-url"
        )
    if importlib.util.find_spec("sglang") is None:
        raise SettingsError(
            f"embedded.engine = sglang needs SGLang, which is not installed; {GPU_INSTALL_HINT},"
            " or attach to a running server with --embedded.sglang-url"
        )
    if not cuda_available():
        raise SettingsError(
            "embedded.engine = sglang launches SGLang, which needs a CUDA GPU, and none is visible here"
            " (torch.cuda.is_available() is false); use embedded.engine = torch, or attach to a server elsewhere"
            " with --embedded.sglang-url"
        )
    return model_path


def node_address() -> str:
    """This node's IP, where a router started by Slime listens (it binds the node's address, not loopback)."""
    return socket.gethostbyname(socket.gethostname())


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU (false when torch is not installed)."""
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def start_server(plan: LaunchPlan) -> subprocess.Popen[bytes]:
    plan.log_file.parent.mkdir(parents=True, exist_ok=True)
    with plan.log_file.open("ab") as log:
        return subprocess.Popen(plan.argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


async def wait_healthy(
    session: aiohttp.ClientSession, url: str, timeout_s: float, process: subprocess.Popen[bytes] | None, log: Path
) -> None:
    """Return once `GET /health` answers 200; RuntimeError when the process exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the SGLang server exited with status {process.returncode}; see {log}")
        try:
            async with session.get(f"{url}{HEALTH}") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the SGLang server at {url} was not healthy after {timeout_s:g} s; see {log}")
        await asyncio.sleep(HEALTH_POLL_S)


def stop_server(process: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """Terminate the server reef started, and kill it if it does not exit in time."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
