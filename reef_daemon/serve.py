"""Running the daemon in the foreground: `reef serve`."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from reef_contract import TOKEN_ENV
from reef_daemon.app import create_app
from reef_daemon.context import DAEMON, Daemon
from reef_daemon.scenario_recipes import other_recipe_notice
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import Settings, live_changes
from reef_daemon.store import StoreUnavailable
from reef_daemon.store.engines.file_owner import StoreInUse

log = logging.getLogger("reef")

SHUTDOWN_GRACE_S = 30.0


def run(
    settings: Settings,
    reload: Callable[[], Settings] | None = None,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM; in-flight requests and queued writes finish first. `on_listening` gets the
    loopback URL once the daemon answers there."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux and macOS
        asyncio.run(_serve(settings, reload, on_listening))
    else:
        uvloop.run(_serve(settings, reload, on_listening))


async def _serve(
    settings: Settings, reload: Callable[[], Settings] | None, on_listening: Callable[[str], None] | None
) -> None:
    # A busy port is reported before the model loads, not after (loading takes seconds, converting it more).
    _check_port(settings.reef.host, settings.reef.port)
    app = create_app(settings)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S, handle_signals=False)
    try:
        await runner.setup()
    except StoreInUse as exc:
        raise SettingsError(str(exc)) from None
    except StoreUnavailable as exc:
        raise SettingsError(f"{exc}; check --store.url") from None
    site = web.TCPSite(runner, settings.reef.host, settings.reef.port, backlog=1024)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise _cannot_listen(settings.reef.host, settings.reef.port, exc) from None
    daemon = app[DAEMON]
    # Everything built so far lives as long as the daemon: keep the collector from rescanning it on every
    # full collection, which otherwise shows up as multi-millisecond stalls in the latency tail.
    gc.freeze()
    port = _bound_port(runner, settings.reef.port)
    url = daemon.listening(port)
    _announce(daemon, port)
    if on_listening is not None:
        on_listening(url)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    watcher = None
    if reload is not None and settings.config_file is not None:
        watcher = asyncio.create_task(_watch_config(daemon, settings.config_file, reload))
    try:
        await stop.wait()
    finally:
        print(
            "reef: shutting down; finishing requests in flight and pending writes",
            file=sys.stderr,
            flush=True,
        )
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        await runner.cleanup()
        print("reef: stopped", file=sys.stderr, flush=True)


def _check_port(host: str, port: int) -> None:
    """SettingsError when `host:port` cannot be bound now (another process listens there)."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise SettingsError(f"cannot listen on {host}:{port}: {exc.strerror}; check --reef.host") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise _cannot_listen(host, port, exc) from None


def _cannot_listen(host: str, port: int, exc: OSError) -> SettingsError:
    return SettingsError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another with --reef.port")


def _bound_port(runner: web.AppRunner, fallback: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return fallback


def _announce(daemon: Daemon, port: int) -> None:
    settings = daemon.settings
    runtime = daemon.runtime.describe()
    serving = runtime.get("model") or "(model chosen by each client)"
    where = f" at {runtime['url']}" if runtime.get("url") else ""
    auth = "on" if daemon.gate.enabled else f"OFF (set {TOKEN_ENV} to require a token)"
    lines = [
        f"reef {_version()} listening on http://{settings.reef.host}:{port}",
        f"  recipe:    {daemon.recipe.name}",
        f"  runtime:   {runtime['kind']} {serving}{where}",
        f"  state dir: {settings.reef.state_dir.resolve()}",
        f"  auth:      {auth}",
    ]
    recipes = {scenario.name: scenario.recipe for scenario in daemon.store.scenarios.all()}
    lines += [f"  note:      {line}" for line in other_recipe_notice(daemon.recipe.name, recipes)]
    print("\n".join(lines), flush=True)


def _version() -> str:
    from reef_daemon import __version__

    return __version__


async def _watch_config(daemon: Daemon, path: Path, reload: Callable[[], Settings]) -> None:
    """Apply token and upstream changes from the config file as it is saved; say when a restart is needed."""
    from watchfiles import awatch

    async for _changes in awatch(path.parent, watch_filter=lambda _change, changed: Path(changed) == path.resolve()):
        try:
            fresh = reload()
        except SettingsError as exc:
            log.error("config file change ignored: %s", exc)
            continue
        live, restart = live_changes(daemon.settings, fresh)
        if live:
            daemon.apply_settings(fresh)
            log.warning("config reloaded: applied %s", ", ".join(live))
        if restart:
            log.warning("config changed %s; restart reef to apply", ", ".join(restart))
