"""The one settings object of the daemon, and how it is assembled.

Each setting is declared once, below, with `setting(...)`: its default, the values it takes, its environment
variable, whether it is secret, whether a reload applies it live, and its help. `CATALOGUE` lists them; the options of
`reef serve` and `reef start` (`--reef.port 8900`), their help and shell completion, the config file's keys and
`--print-config` are all made from it.

Sources, highest first: command line, the config file (`-c FILE`, TOML or YAML, same keys), environment
(`REEF_TOKEN`, `REEF_UPSTREAM_URL`, ...), the recipe's profile, defaults. Every value remembers where it came from, so
`reef serve --print-config` can say so. Any unknown key or bad value is a `SettingsError` with one line that names it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from reef_contract import (
    CHAT_ROUTE,
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_STATE_DIR,
    INFERENCE_TIMEOUT_ENV,
    JUDGE_API_KEY_ENV,
    REPORT_SOURCES,
    STORE_URL_ENV,
    TOKEN_ENV,
    UPSTREAM_API_KEY_ENV,
    UPSTREAM_MODEL_ENV,
    UPSTREAM_URL_ENV,
    did_you_mean,
)
from reef_daemon.builtin_recipes import builtin_sections
from reef_daemon.harness.settings import HarnessSection
from reef_daemon.setting_kinds import (
    AGE,
    BYTES,
    CHAT_ENDPOINT,
    CLIENT_AUTH,
    COUNT,
    DECODE_WEIGHTS,
    ENGINE,
    FRACTION,
    KAPPA,
    NUMBER,
    OPTIONAL_PATH,
    OPTIONAL_TEXT,
    OTLP_ENDPOINT,
    PATH,
    PORT,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    SIZE,
    SOURCES,
    STORE_URL,
    SWITCH,
    TEMPERATURE,
    TEXT,
    TOKENS,
    TOP_P,
    URL,
    Kind,
    SettingsError,
    setting,
)


@dataclass(frozen=True)
class ReefSection:
    host: str = setting(DEFAULT_HOST, TEXT, help="address to bind; keep it on loopback unless you mean it")
    port: int = setting(DEFAULT_PORT, PORT, help="port to listen on")
    token: str | None = setting(
        None,
        OPTIONAL_TEXT,
        env=TOKEN_ENV,
        secret=True,
        live=True,
        help="bearer token clients must send",
    )
    tokens: tuple[str, ...] = setting((), TOKENS, secret=True, live=True, help="more accepted tokens, for rotation")
    state_dir: Path = setting(DEFAULT_STATE_DIR, PATH, help="where records and releases are kept")
    max_body_mb: float = setting(64.0, POSITIVE_NUMBER, help="largest request body accepted, in MiB")
    export_page_mb: float = setting(
        16.0,
        POSITIVE_NUMBER,
        help="how many MiB of stored records an export reads at a time; an export holds one such page and the "
        "record it is writing, whatever the records' sizes",
    )


@dataclass(frozen=True)
class InferenceSection:
    upstream_url: str | None = setting(
        None, URL, env=UPSTREAM_URL_ENV, live=True, help="base URL of the model API reef fronts"
    )
    upstream_model: str | None = setting(
        None, OPTIONAL_TEXT, env=UPSTREAM_MODEL_ENV, live=True, help="the model id served upstream"
    )
    upstream_api_key: str | None = setting(
        None,
        OPTIONAL_TEXT,
        env=UPSTREAM_API_KEY_ENV,
        secret=True,
        live=True,
        help="key reef sends upstream instead of the client's (with client-auth pass, only when the client sent none)",
    )
    client_auth: str = setting(
        "reef",
        CLIENT_AUTH,
        live=True,
        help="reef: a client's Authorization / x-api-key is reef's token and never goes upstream; pass: a client "
        "that sends reef's token in reef's token header has its own Authorization / x-api-key (a plan login, say) "
        "forwarded upstream unchanged",
    )
    timeout_s: float = setting(
        300.0,
        POSITIVE_NUMBER,
        env=INFERENCE_TIMEOUT_ENV,
        live=True,
        help="upstream timeout: for connecting, for each read, and between a stream's events (keep-alive comments "
        "do not count)",
    )
    max_answer_mb: float = setting(
        64.0,
        POSITIVE_NUMBER,
        live=True,
        help="largest upstream answer reef relays and records, in MiB; a longer one fails its exchange",
    )
    model_path: Path | None = setting(None, OPTIONAL_PATH, help="a local model for the embedded runtime")
    temperature: float = setting(
        0.0,
        TEMPERATURE,
        help="embedded runtime: sampling temperature of a request that sets none (0: greedy, see bench/README.md)",
    )
    top_p: float = setting(1.0, TOP_P, help="embedded runtime: nucleus (top-p) mass of a request that sets none")
    max_tokens: int = setting(
        512, POSITIVE_INT, help="embedded runtime: the most tokens an answer gets when its request sets no limit"
    )
    max_answer_tokens: int = setting(
        1024,
        POSITIVE_INT,
        help="embedded runtime: the most tokens any answer gets; a request asking for more (Claude Code asks for "
        "32000) is held to it, and its answer ends there as finished (finish reason stop)",
    )
    max_answer_s: float = setting(
        120.0,
        POSITIVE_NUMBER,
        help="embedded runtime: the most seconds any answer may take, its prompt's reading included; a longer one "
        "ends there as finished (finish reason stop)",
    )
    repeat_stop_tokens: int = setting(
        128,
        COUNT,
        help="embedded runtime: end an answer as finished (finish reason stop) once its last this many tokens repeat "
        "one span of at most 64 tokens back to back (a small model looping); 0: never",
    )
    max_prompt_chars: int = setting(
        1_000_000,
        POSITIVE_INT,
        help="embedded runtime: the most characters a prompt may have; a longer one is refused before it is tokenized",
    )
    max_stop_sequences: int = setting(
        16, POSITIVE_INT, help="embedded runtime: the most stop sequences one request may send"
    )
    max_stop_chars: int = setting(
        500, POSITIVE_INT, help="embedded runtime: the most characters one stop sequence may have"
    )


@dataclass(frozen=True)
class EmbeddedSection:
    """The embedded runtime's engine: the model in this process (torch), or an SGLang server (sglang)."""

    engine: str = setting(
        "torch",
        ENGINE,
        help="what generates: torch (this process) or sglang (an SGLang server reef launches from "
        "inference.model-path, or attaches to at embedded.sglang-url)",
    )
    decode_weights: str = setting(
        "auto",
        DECODE_WEIGHTS,
        help="the copies of the weights torch decodes from: auto (the fewest bits that hold a weight exactly, with "
        "a scale and minimum per 32: 4 bits for a GGUF's 4-bit weights, bytes for its 8-bit ones; fp16 for the "
        "others; log-probs within ~0.005 nats of fp32), fp16 (log-probs within "
        "~0.01 nats of fp32) or int8 (bytes for every weight: log-probs within ~0.01 nats on average and ~0.05 at "
        "worst of weights that are not exact)",
    )
    sglang_url: str | None = setting(None, URL, help="attach to the SGLang server (or router) at this URL")
    sglang_port: int = setting(30000, PORT, help="port of the SGLang server (or Slime's router) reef starts")
    sglang_tp: int = setting(1, POSITIVE_INT, help="tensor-parallel GPUs of the SGLang server reef launches")
    sglang_mem_fraction: float = setting(
        0.8, FRACTION, help="share of GPU memory the launched SGLang server takes for weights and cache"
    )
    sglang_start_timeout_s: float = setting(
        900.0, POSITIVE_NUMBER, help="how long a launched SGLang server may take to answer its health check"
    )


@dataclass(frozen=True)
class ReportsSection:
    """What a report may say: the one score scale every client uses (`reef score`, `--from`, the TUI's keys, HTTP)."""

    score_min: float = setting(0.0, NUMBER, help="the worst score a report may give")
    score_max: float = setting(1.0, NUMBER, help="the best score a report may give")
    sources: tuple[str, ...] = setting(
        REPORT_SOURCES,
        SOURCES,
        help="the reports recipes, live scores, replays and the gate's tasks count: all, or some of person, words, "
        "retry, interruption, tool-error, tests, next-turn, judge, outcome, import (a person's report always wins "
        "over a derived one for the same record)",
    )
    words: str = setting(
        "on",
        SWITCH,
        live=True,
        help="score an answer low or high by rules on the user's next message (no, still fails, revert; thanks, "
        "works), before any judge model and with no model call; what the rules cannot tell is left to the judge",
    )
    retry: str = setting(
        "on",
        SWITCH,
        live=True,
        help="score an answer low when the same request is sent again in its session (a regenerate), with no model "
        "call",
    )
    interruption: str = setting(
        "on",
        SWITCH,
        live=True,
        help="score an answer low when its client cut it off before the end and went on in the conversation, with no "
        "model call",
    )
    tool_error: str = setting(
        "on",
        SWITCH,
        live=True,
        help="score an answer low when a tool call it made failed (is_error, a non-zero exit code, a Python "
        "traceback in the result), with no model call",
    )
    tests: str = setting(
        "on",
        SWITCH,
        live=True,
        help="score the answers since the conversation's previous test run high when the run one of them made "
        "turned its tests from red to green, low from green to red (pytest, npm test, go test, cargo test), with no "
        "model call",
    )
    min_agreement: float = setting(
        0.2,
        KAPPA,
        help="a derived source whose agreement with people's scores in a scenario (Cohen's kappa on low/high) falls "
        "below this stops counting there; `reef sources enable` turns it back on",
    )
    min_agreement_records: int = setting(
        20, POSITIVE_INT, help="the records a source must share with people's scores before its agreement can stop it"
    )
    next_turn: str = setting(
        "off",
        SWITCH,
        help="judge each assistant turn from the user's next message (accepted, corrected, complained, neutral), "
        "off the request path; the judge's calls are recorded under the scenario reef-judge",
    )
    next_turn_memory: int = setting(
        16 * 1024**2,
        BYTES,
        help="the most memory (16M, 1G) the answers waiting for their next turn may hold; beyond it the oldest are "
        "let go unjudged, counted in reef status",
    )
    next_turn_max_chars: int = setting(
        65536, POSITIVE_INT, help="the most characters of a user's next message the judge reads (its start)"
    )
    judge_url: str | None = setting(
        None,
        CHAT_ENDPOINT,
        live=True,
        help=f"the judge's OpenAI-compatible endpoint: its base URL or its full …{CHAT_ROUTE} URL; unset: the"
        " served model judges",
    )
    judge_model: str | None = setting(None, OPTIONAL_TEXT, live=True, help="the model the judge endpoint serves")
    judge_api_key: str | None = setting(
        None, OPTIONAL_TEXT, env=JUDGE_API_KEY_ENV, secret=True, live=True, help="key reef sends to the judge endpoint"
    )
    judge_calls_per_minute: int = setting(
        20, POSITIVE_INT, help="the most judge calls a minute; turns beyond it are not judged"
    )
    judge_votes: int = setting(
        1,
        POSITIVE_INT,
        help="how many times the next-turn judge is asked about one turn (sampled, not greedy, when more than 1); the "
        "verdict more than half give counts, a tie gives no report; each vote is a call of judge-calls-per-minute",
    )
    judge_max_tokens: int = setting(200, POSITIVE_INT, help="the most tokens one judge answer may have")
    judge_max_prompt_chars: int = setting(
        6000, POSITIVE_INT, help="the most characters of a conversation one judge call is shown (its end is kept)"
    )
    judge_timeout_s: float = setting(60.0, POSITIVE_NUMBER, help="how long one judge call may take")


@dataclass(frozen=True)
class StoreSection:
    """Where records, reports, steps and events are kept: the SQLite file in the state directory, or a PostgreSQL
    database that several daemons share."""

    url: str | None = setting(
        None,
        STORE_URL,
        env=STORE_URL_ENV,
        secret=True,
        help="postgresql://USER:PASSWORD@HOST/DB to share one store between daemons (none: the SQLite file in "
        "reef.state-dir)",
    )
    max_bytes: int | None = setting(
        None,
        SIZE,
        help="keep at most this much of record bodies (500M, 20G); the oldest beyond it are trimmed, their rows, "
        "scores and token counts kept",
    )
    max_age: float | None = setting(
        None, AGE, help="trim the bodies of records older than this (30d, 12h, or seconds); rows and scores stay"
    )
    flush: str = setting(
        "off",
        SWITCH,
        help="acknowledge a write only once it is on disk (SQLite synchronous=FULL; PostgreSQL the server's "
        "synchronous_commit); off: once the database holds it, which no crash of a daemon loses",
    )
    timeout_s: float = setting(
        10.0,
        POSITIVE_NUMBER,
        help="how long to wait for the PostgreSQL server's answer; past it, a server that does not let a new "
        "connection in either fails the request with 503 (a long statement is waited for)",
    )


@dataclass(frozen=True)
class TelemetrySection:
    """OpenTelemetry export. The standard OTEL_* variables configure it as any SDK's (OTEL_EXPORTER_OTLP_ENDPOINT,
    _HEADERS, OTEL_SERVICE_NAME, OTEL_SDK_DISABLED ...); these settings are reef's own."""

    otlp_endpoint: str | None = setting(
        None,
        OTLP_ENDPOINT,
        help="export spans over OTLP/HTTP to this collector's base URL (beats OTEL_EXPORTER_OTLP_ENDPOINT; none and "
        "no OTEL_EXPORTER_OTLP_ENDPOINT: nothing is exported)",
    )
    capture_content: str = setting(
        "off",
        SWITCH,
        help="put prompts and answers on exported spans (also OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
        "=true); off: token counts and ids only",
    )
    prices: Path | None = setting(
        None,
        OPTIONAL_PATH,
        help='a JSON price table, {"MODEL": {"input": USD, "output": USD}} per million tokens, instead of reef\'s',
    )


# The daemon's own sections. The recipes declare theirs (`SETTINGS_SECTIONS` beside the recipe class, see
# recipe_api.py); every built-in recipe's are known, so `--help`, the config file and completion offer them.
CORE_SECTIONS: dict[str, type[Any]] = {
    "reef": ReefSection,
    "harness": HarnessSection,
    "inference": InferenceSection,
    "reports": ReportsSection,
    "embedded": EmbeddedSection,
    "store": StoreSection,
    "telemetry": TelemetrySection,
}

Section = TypeVar("Section")


@dataclass(frozen=True)
class Settings:
    """Every setting of a daemon, with where each value came from."""

    reef: ReefSection = field(default_factory=ReefSection)
    inference: InferenceSection = field(default_factory=InferenceSection)
    reports: ReportsSection = field(default_factory=ReportsSection)
    embedded: EmbeddedSection = field(default_factory=EmbeddedSection)
    store: StoreSection = field(default_factory=StoreSection)
    telemetry: TelemetrySection = field(default_factory=TelemetrySection)
    harness: HarnessSection = field(default_factory=HarnessSection)
    recipe: str = setting("record", TEXT, help="recipe name or package.module:Class")
    # The recipes' sections, by name (`harness`, `training` ...): read one with `of`.
    recipe_sections: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    config_file: Path | None = None

    @property
    def accepted_tokens(self) -> tuple[str, ...]:
        tokens = ((self.reef.token,) if self.reef.token else ()) + self.reef.tokens
        return tuple(dict.fromkeys(tokens))

    def of(self, section: type[Section]) -> Section:
        """A recipe's section of settings, by its class (`settings.of(TrainingSection)`); its defaults if none was
        loaded."""
        for value in self.recipe_sections.values():
            if isinstance(value, section):
                return value
        return section()

    @property
    def catalogue(self) -> dict[str, SettingInfo]:
        """The settings these were loaded with: the daemon's and the recipes' sections."""
        return _catalogue_of((*CORE_SECTIONS.items(), *((n, type(v)) for n, v in self.recipe_sections.items())))

    def value(self, key: str) -> Any:
        info = self.catalogue[key]
        if not info.section:
            return getattr(self, info.attr)
        if info.section in CORE_SECTIONS:
            return getattr(getattr(self, info.section), info.attr)
        return getattr(self.recipe_sections[info.section], info.attr)

    def describe(self) -> list[tuple[str, str, str]]:
        """(key, shown value, source) for every setting; secrets are masked."""
        rows = []
        for key, info in self.catalogue.items():
            value = self.value(key)
            if info.secret:
                shown = "(unset)" if not value else "****"
            elif value is None:
                shown = "(unset)"
            elif isinstance(value, tuple):
                shown = json.dumps(list(value))
            else:
                shown = str(value)
            rows.append((key, shown, self.sources.get(key, "default")))
        return rows


@dataclass(frozen=True)
class SettingInfo:
    """One declared setting, as the command line, the config file, `--print-config` and completion see it."""

    key: str  # canonical dotted name, hyphenated: "reef.state-dir"; top-level settings have no section: "recipe"
    section: str
    attr: str
    default: Any
    kind: Kind
    env: str | None
    secret: bool
    live: bool
    help: str


@functools.cache
def _catalogue_of(sections: tuple[tuple[str, type[Any]], ...]) -> dict[str, SettingInfo]:
    infos: dict[str, SettingInfo] = {}
    for section, cls in sections:
        for f in dataclasses.fields(cls):
            key = f"{section}.{f.name.replace('_', '-')}"
            infos[key] = SettingInfo(key, section, f.name, f.default, **f.metadata)
    for f in dataclasses.fields(Settings):
        if "kind" in f.metadata:
            infos[f.name] = SettingInfo(f.name, "", f.name, f.default, **f.metadata)
    return infos


def all_sections(recipe_sections: Mapping[str, type[Any]] | None = None) -> dict[str, type[Any]]:
    """The daemon's sections, every built-in recipe's, and `recipe_sections` (a recipe named by reference).

    Raises:
        SettingsError: a recipe declares a section under a name another part already uses.
    """
    sections = dict(CORE_SECTIONS)
    for name, cls in [*builtin_sections().items(), *(recipe_sections or {}).items()]:
        if sections.setdefault(name, cls) is not cls or name in ("recipe", "sources", "config_file"):
            raise SettingsError(f"the recipe's settings section '{name}' is already a section of reef's settings")
    return sections


def catalogue(recipe_sections: Mapping[str, type[Any]] | None = None) -> dict[str, SettingInfo]:
    """Every setting, by canonical key: the daemon's, every built-in recipe's, and `recipe_sections`'."""
    return _catalogue_of(tuple(all_sections(recipe_sections).items()))


def canonical_key(raw: str, known: Mapping[str, SettingInfo] | None = None) -> str:
    """`reef.state_dir`, `reef.state-dir` and `--reef.state-dir` all name `reef.state-dir`."""
    known = catalogue() if known is None else known
    key = raw.lstrip("-").strip().replace("_", "-").lower()
    if key not in known:
        raise SettingsError(f"unknown setting '{raw}'{did_you_mean(key, known)}; accepted: {', '.join(known)}")
    return key


def _flatten_file(data: Mapping[str, Any], path: Path, known: Mapping[str, SettingInfo]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for top, value in data.items():
        if not isinstance(top, str):
            raise SettingsError(f"{path}: keys must be strings, found {top!r}")
        if isinstance(value, Mapping):
            for sub, inner in value.items():
                flat[canonical_key(f"{top}.{sub}", known)] = inner
        else:
            flat[canonical_key(top, known)] = value
    return flat


def read_config_table(path: Path) -> Mapping[str, Any]:
    """A TOML or YAML config file's table, as written."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        if path.suffix.lower() == ".toml":
            data: Any = tomllib.loads(text)
        else:
            data = yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        kind = "toml" if path.suffix.lower() == ".toml" else "yaml"
        raise SettingsError(f"config file {path} is not valid {kind}: {first_line}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise SettingsError(f"config file {path} must hold a table of settings")
    return data


def read_config_file(path: Path, known: Mapping[str, SettingInfo] | None = None) -> dict[str, Any]:
    """Read a TOML or YAML file into canonical dotted keys."""
    return _flatten_file(read_config_table(path), path, catalogue() if known is None else known)


def load_settings(
    *,
    config_file: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    profile: Mapping[str, Any] | None = None,
    recipe_sections: Mapping[str, type[Any]] | None = None,
) -> Settings:
    """Assemble settings: command line > file > environment > the recipe's profile > default. `recipe_sections`
    are the sections of a recipe named by reference (the built-in recipes' are always known)."""
    environ = os.environ if environ is None else environ
    sections_by_name = all_sections(recipe_sections)
    known = _catalogue_of(tuple(sections_by_name.items()))
    chosen: dict[str, tuple[Any, str]] = {}
    for key, value in (profile or {}).items():
        chosen[canonical_key(key, known)] = (value, "recipe profile")
    for key, info in known.items():
        if info.env and environ.get(info.env, "").strip():
            chosen[key] = (environ[info.env], f"environment ({info.env})")
    if config_file is not None:
        for key, value in read_config_file(config_file, known).items():
            chosen[key] = (value, "file")
    for key, value in (overrides or {}).items():
        chosen[canonical_key(key, known)] = (value, "command line")

    sections: dict[str, dict[str, Any]] = {name: {} for name in sections_by_name}
    top: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, (raw, source) in chosen.items():
        info = known[key]
        try:
            value = info.kind.parse(raw)
        except ValueError as exc:
            raise SettingsError(f"bad value for {key} (from {source}): {exc}") from None
        if info.section:
            sections[info.section][info.attr] = value
        else:
            top[info.attr] = value
        sources[key] = source
    reports = ReportsSection(**sections["reports"])
    if reports.score_min >= reports.score_max:
        raise SettingsError(
            f"reports.score-min ({reports.score_min:g}) must be below reports.score-max ({reports.score_max:g})"
        )
    return Settings(
        reef=ReefSection(**sections["reef"]),
        inference=InferenceSection(**sections["inference"]),
        reports=reports,
        embedded=EmbeddedSection(**sections["embedded"]),
        store=StoreSection(**sections["store"]),
        telemetry=TelemetrySection(**sections["telemetry"]),
        harness=HarnessSection(**sections["harness"]),
        recipe_sections={
            name: cls(**sections[name]) for name, cls in sections_by_name.items() if name not in CORE_SECTIONS
        },
        sources=sources,
        config_file=config_file,
        **top,
    )


def live_changes(old: Settings, new: Settings) -> tuple[list[str], list[str]]:
    """Keys that changed between two loads: (applied without a restart, needing a restart)."""
    live: list[str] = []
    restart: list[str] = []
    for key, info in old.catalogue.items():
        if old.value(key) != new.value(key):
            (live if info.live else restart).append(key)
    return live, restart


def with_live_values(current: Settings, fresh: Settings) -> Settings:
    """`current` with only the live settings (tokens, upstream) taken from `fresh`."""
    known = current.catalogue

    def refreshed(name: str, section: Any) -> Any:
        changes = {info.attr: fresh.value(info.key) for info in known.values() if info.section == name and info.live}
        return dataclasses.replace(section, **changes)

    core = {name: refreshed(name, getattr(current, name)) for name in CORE_SECTIONS}
    recipes = {name: refreshed(name, section) for name, section in current.recipe_sections.items()}
    sources = dict(current.sources)
    for key, info in known.items():
        if info.live:
            if key in fresh.sources:
                sources[key] = fresh.sources[key]
            else:
                sources.pop(key, None)
    return dataclasses.replace(current, sources=sources, recipe_sections=recipes, **core)
