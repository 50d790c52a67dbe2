"""Building the aiohttp application: parts in start-up order, routes, middlewares, clean shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from aiohttp import web

import reef_daemon.routes.records_io as records_io
from reef_contract import INFERENCE_ROUTES, JUDGE_SCENARIO, RecordType, ScoreScale, small_embedded_model
from reef_daemon.auth import TokenGate
from reef_daemon.context import DAEMON, Daemon
from reef_daemon.events import EventBus
from reef_daemon.harness.canary import CanaryWatch
from reef_daemon.harness.progress import RequestProgress
from reef_daemon.middlewares import errors_and_overhead, limit_body, remember_started, require_token
from reef_daemon.proxy.handler import handle_inference
from reef_daemon.recipe_host import consumed_types, resolve_recipe, units_of
from reef_daemon.recipe_interface import RecipeContext
from reef_daemon.recipe_worker import RecipeWorkers
from reef_daemon.records import InferenceDraft
from reef_daemon.reports import ReportValidator
from reef_daemon.reports.judge import JudgeModel, next_turn_refusal
from reef_daemon.reports.next_turn import NextTurnSignals
from reef_daemon.routes import (
    events,
    harness,
    install,
    judging,
    live,
    records,
    releases,
    reports,
    requests,
    scenarios,
    sources,
    status,
    tasks,
)
from reef_daemon.runtimes.base import Runtime
from reef_daemon.runtimes.select import build_runtime
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import Settings
from reef_daemon.store import Budget, Protected, Store, TrustPolicy
from reef_daemon.telemetry import PriceTable, PriceTableError, TelemetryError, build_telemetry

log = logging.getLogger("reef")

# A connection must send a request's headers in full within this long of opening (or of its previous answer);
# aiohttp's keep-alive timer closes it otherwise, so unfinished headers cannot hold a connection open.
HEADER_READ_TIMEOUT_S = 30.0
# How long a shutdown lets the model streams in flight run on before it cuts them (each is recorded as cut).
STREAM_DRAIN_S = 5.0


def create_app(settings: Settings, runtime: Runtime | None = None) -> web.Application:
    """The daemon as an aiohttp application. Its parts open on start-up and close, writes finished, on cleanup."""
    recipe_class = resolve_recipe(settings.recipe)
    if settings.reports.next_turn == "on":
        refused = next_turn_refusal(settings.reports, recipe_class.trains_served_model(settings))
        if refused is not None:
            raise SettingsError(refused)
    try:
        prices = PriceTable.load(settings.telemetry.prices)
        telemetry = build_telemetry(settings.telemetry.otlp_endpoint, settings.telemetry.capture_content, prices)
    except (PriceTableError, TelemetryError) as error:
        raise SettingsError(str(error)) from None
    bus = EventBus()
    scale: ScoreScale = {"min": settings.reports.score_min, "max": settings.reports.score_max}
    budget = Budget(settings.store.max_bytes, settings.store.max_age)
    store = Store(
        settings.reef.state_dir,
        bus.publish,
        score_scale=scale,
        url=settings.store.url,
        budget=budget,
        trust=TrustPolicy(settings.reports.min_agreement, settings.reports.min_agreement_records),
        flush=settings.store.flush == "on",
        answer_wait_s=settings.store.timeout_s,
    )
    recipe = recipe_class(settings)
    runtime = runtime if runtime is not None else build_runtime(settings)
    gate = TokenGate(settings.accepted_tokens)
    daemon = Daemon(
        workers=RecipeWorkers(recipe, store, bus),
        settings=settings,
        store=store,
        bus=bus,
        runtime=runtime,
        recipe=recipe,
        gate=gate,
        lent=RecipeContext(store, runtime, settings, gate, RequestProgress(store)),
        reports=ReportValidator(score_scale=(settings.reports.score_min, settings.reports.score_max)),
        prices=prices,
        telemetry=telemetry,
    )
    max_body = int(settings.reef.max_body_mb * 1024 * 1024)
    app = web.Application(
        middlewares=[errors_and_overhead, require_token, limit_body],
        client_max_size=max_body,
        handler_args={"max_field_size": 65536, "keepalive_timeout": HEADER_READ_TIMEOUT_S},
    )
    app[DAEMON] = daemon
    for route in INFERENCE_ROUTES:
        app.router.add_post(route, handle_inference)
    for module in (reports, judging, scenarios, records, releases, events, status, requests, harness, install, live):
        app.router.add_routes(module.routes)
    app.router.add_routes(sources.routes)
    app.router.add_routes(records_io.routes)
    app.router.add_routes(tasks.routes)
    app.on_response_prepare.append(remember_started)
    app.cleanup_ctx.append(_lifecycle)
    app.on_shutdown.append(_end_streams)
    return app


async def _end_streams(app: web.Application) -> None:
    """Event streams never end by themselves, and a model's stream may not for a long time: close event streams,
    give model streams `STREAM_DRAIN_S` to finish, then cut them, so a shutdown does not wait on either."""
    daemon = app[DAEMON]
    daemon.bus.close_all()
    daemon.stopping = True
    if not daemon.relays:
        return
    _finished, cut = await asyncio.wait(set(daemon.relays), timeout=STREAM_DRAIN_S)
    for task in cut:
        task.cancel()
    if cut:
        await asyncio.wait(cut, timeout=STREAM_DRAIN_S)  # each stores its record, shielded, as it ends


def _in_training(daemon: Daemon) -> Protected:
    """What the retention budget must keep: the bodies a recipe may still train on. On a store of its own only this
    daemon's recipe trains; on a shared one each scenario's recipe may train on another daemon, whatever this one
    runs (one this reef cannot load keeps everything of its scenarios)."""
    recipe = daemon.recipe
    shared = daemon.store.engine.shared
    trained: list[str] = []
    on_inference: list[str] = []
    for scenario in daemon.store.scenarios.all():
        if scenario.recipe == recipe.name:
            units: tuple[RecordType, ...] | None = consumed_types(recipe)
        elif shared:
            units = units_of(scenario.recipe)
        else:
            continue
        if units is None or units:
            trained.append(scenario.name)
        if units is None or "inference" in units:
            on_inference.append(scenario.name)
    return Protected(trained, on_inference)


def judge_model(daemon: Daemon) -> JudgeModel:
    """The deployment's judge, its calls recorded under the judge's own scenario."""

    async def record(draft: InferenceDraft) -> None:
        await daemon.ensure_scenario(JUDGE_SCENARIO)
        await daemon.store.records.append_inference(draft)

    settings = daemon.settings
    trains_served = type(daemon.recipe).trains_served_model(settings)
    return JudgeModel(settings.reports, daemon.runtime, record, settings.inference.upstream_model, trains_served)


def _caution_on_the_judge(daemon: Daemon) -> None:
    """Say at start when the next-turn judge is the small embedded model, which mostly answers without a verdict."""
    if daemon.settings.reports.judge_url is None and small_embedded_model(daemon.runtime.describe()):
        log.warning(
            "reports.next-turn: the judge is the small embedded model, which mostly answers without a verdict, so"
            " few turns will be scored; set --reports.judge-url (and --reports.judge-model) to a capable model"
        )


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    daemon = app[DAEMON]
    daemon.store.open(asyncio.get_running_loop())
    await daemon.runtime.start()
    await daemon.recipe.start(daemon.lent)
    daemon.workers.start()
    if daemon.telemetry is not None:
        daemon.telemetry.start(daemon.bus, daemon.store)
    canaries = CanaryWatch(daemon)
    canaries.start()
    retention = asyncio.create_task(daemon.store.retention.run(lambda: _in_training(daemon)))
    daemon.judge = judge = judge_model(daemon)
    reports = daemon.settings.reports
    if reports.next_turn == "on":
        _caution_on_the_judge(daemon)
    if "on" in (
        reports.words,
        reports.retry,
        reports.interruption,
        reports.tool_error,
        reports.tests,
        reports.next_turn,
    ):
        next_turn_judge = judge if reports.next_turn == "on" else None
        daemon.next_turn = NextTurnSignals(daemon.store, daemon.bus, next_turn_judge, reports)
        daemon.next_turn.start()
    yield
    if daemon.next_turn is not None:
        await daemon.next_turn.stop()
    await judge.close()
    if daemon.telemetry is not None:
        await daemon.telemetry.stop()
    retention.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await retention
    await canaries.stop()
    await daemon.workers.stop()
    await daemon.recipe.close()
    await daemon.runtime.close()
    # Every queued write is committed before the writer thread exits.
    await asyncio.to_thread(daemon.store.close)
