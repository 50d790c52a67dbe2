"""The jail a trial runs in: bubblewrap with no network, every namespace unshared, the file system read-only, the
person's home and the daemon's state hidden, the trial's throwaway root the only writable place, and a clean
environment.

The model is reached only through a Unix socket reef serves in the root (`model.sock`), which relays the trial's
model calls to this daemon and nothing else (`model_relay`; for the agent proposer it also serves the run's own
tools, which reef runs outside the jail); inside, `jail_bridge` serves it on the jail's own loopback, where the
agent's binding points.
`harness.sandbox = none` (`REEF_PROPOSER_SANDBOX=none`) runs trials as plain children instead, for a trusted
machine without bubblewrap.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path

from aiohttp import web

from reef_contract import PROPOSER_SANDBOX_ENV
from reef_daemon.harness.model_relay import Budget, relay_app

BWRAP = "bwrap"
NONE = "none"
SOCKET = "model.sock"
JAIL_TMP = Path("/tmp")  # noqa: S108 - an empty tmpfs inside the jail, not a file reef writes
JAIL_PORT = 8901  # where the agent inside finds the model; the jail has its own network namespace
NO_BWRAP = (
    f"bubblewrap is not installed on this host (apt-get install bubblewrap); set {PROPOSER_SANDBOX_ENV}=none to run "
    "trials without a jail on a trusted machine"
)


def check_sandbox_setting(value: str) -> str | None:
    """Why a `harness.sandbox` value is unusable, or None."""
    if value in (BWRAP, NONE):
        return None
    return f"harness.sandbox: '{value}' is not bwrap or none"


def jail_argv(
    bwrap: str,
    root: Path,
    hidden: Iterable[Path],
    needed: Iterable[Path],
    env: Mapping[str, str],
    agent_argv: list[str],
    readonly: Iterable[Path] = (),
) -> list[str]:
    """The bwrap command that runs `agent_argv` (behind the bridge) in the jail. `hidden` paths get an empty tmpfs;
    `needed` paths (the agent's and Python's installs) stay readable even when they lie under one, and a hidden
    path inside a needed one is hidden again. `readonly` paths inside the root stay read-only there."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--ro-bind", "/", "/"]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    # A home of `/` (a service account's) or one that does not exist hides nothing.
    hidden = [path.absolute() for path in [JAIL_TMP, *hidden] if path.is_dir() and path.absolute() != Path("/")]
    covered = _outermost(hidden)
    for path in covered:
        argv += ["--tmpfs", str(path)]
    shown = sorted(
        {
            path.absolute()
            for path in needed
            if path.exists() and path.absolute() not in hidden and _under_any(path.absolute(), covered)
        }
    )
    for path in shown:
        argv += ["--ro-bind", str(path), str(path)]
    for path in hidden:
        if any(parent in path.parents for parent in shown):
            argv += ["--tmpfs", str(path)]
    argv += ["--bind", str(root), str(root)]
    for path in readonly:
        argv += ["--ro-bind", str(path), str(path)]
    argv += ["--chdir", str(root / "workspace"), "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    bridge = [sys.executable, "-m", "reef_daemon.harness.jail_bridge", str(JAIL_PORT), str(root / SOCKET), "--"]
    return [*argv, "--", *bridge, *agent_argv]


def needed_paths(binary: str) -> list[Path]:
    """What the agent and the bridge need to read: the binary's folder, where its link leads, the top node_modules
    or the virtual environment it belongs to, node's install, Python's prefixes and reef's own source."""
    given, resolved = Path(binary).absolute(), Path(binary).resolve()
    paths = [given.parent, resolved.parent]
    modules = [folder for folder in resolved.parents if folder.name == "node_modules"]
    paths += modules[-1:]
    paths += [folder for folder in (given.parent.parent, resolved.parent.parent) if (folder / "pyvenv.cfg").exists()]
    node = shutil.which("node")
    if node is not None:
        paths.append(Path(node).resolve().parent.parent)
    paths += [Path(sys.prefix), Path(sys.base_prefix), Path(__file__).resolve().parents[2]]
    return paths


@contextlib.asynccontextmanager
async def model_socket(
    root: Path,
    daemon_url: str,
    scenario: str,
    budget: Budget | None = None,
    routes: Iterable[web.RouteDef] = (),
    token: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> AsyncIterator[Path]:
    """Serve `root/model.sock` while the block runs: model calls recorded in `scenario` (tagged with `tags`), relayed
    to the daemon, and `routes` (see `relay_app`, also for `token`)."""
    path = root / SOCKET
    app = relay_app(daemon_url, scenario, budget, routes, token, tags)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5)
    await runner.setup()
    try:
        await web.UnixSite(runner, str(path)).start()
        yield path
    finally:
        await runner.cleanup()
        with contextlib.suppress(OSError):
            os.unlink(path)


@contextlib.asynccontextmanager
async def model_endpoint(
    root: Path,
    daemon_url: str,
    scenario: str,
    jailed: bool,
    budget: Budget | None = None,
    tags: Mapping[str, str] | None = None,
    routes: Iterable[web.RouteDef] = (),
    token: str | None = None,
) -> AsyncIterator[str]:
    """The URL an agent's binding points at while the block runs: the jail's bridge behind `root/model.sock`, or
    (without a jail) a loopback relay; either way the same relay, its budget, tags, `routes` and lent `token` (see
    `relay_app`)."""
    if jailed:
        async with model_socket(root, daemon_url, scenario, budget, routes, token, tags):
            yield f"http://127.0.0.1:{JAIL_PORT}"
        return
    app = relay_app(daemon_url, scenario, budget, routes, token, tags)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """The paths in order, without any that lies under an earlier one (its tmpfs already hides it)."""
    kept: list[Path] = []
    for path in paths:
        resolved = path.absolute()
        if not _under_any(resolved, kept):
            kept.append(resolved)
    return kept


def _under_any(path: Path, parents: Iterable[Path]) -> bool:
    return any(path == parent or parent in path.parents for parent in parents)
