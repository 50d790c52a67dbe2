"""The one settings object of the daemon, and how it is assembled.

Each setting is declared once, below, with `_setting(...)`: its default, the values it takes, its environment
variable, whether it is secret, whether a reload applies it live, and its help. `CATALOGUE` lists them; the options of
`reef serve` and `reef start` (`--reef.port 8900`), their help and shell completion, the config file's keys and
`--print-config` are all made from it.

Sources, highest first: command line, the config file (`-c FILE`, TOML or YAML, same keys), environment
(`REEF_TOKEN`, `REEF_UPSTREAM_URL`, ...), the recipe's profile, defaults. Every value remembers where it came from, so
`reef serve --print-config` can say so. Any unknown key or bad value is a `SettingsError` with one line that names it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from reef_daemon.contract import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_STATE_DIR,
    HARNESS_ADAPTER_ENV,
    INFERENCE_TIMEOUT_ENV,
    MAX_STALENESS_ENV,
    PROPOSER_SANDBOX_ENV,
    SAO_BATCH_SIZE_ENV,
    TOKEN_ENV,
    UPSTREAM_API_KEY_ENV,
    UPSTREAM_MODEL_ENV,
    UPSTREAM_URL_ENV,
)


class SettingsError(Exception):
    """A setting is unknown or has a value that cannot be used. The message names it."""


# --- value parsers: each takes a value from a file (any JSON-ish type) or a command-line string ---


def _parse_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError("expected a string")


def _parse_optional_str(value: Any) -> str | None:
    if value is None:
        return None
    text = _parse_str(value).strip()
    return text or None


def _parse_port(value: Any) -> int:
    port = _parse_int(value)
    if not 0 <= port <= 65535:
        raise ValueError("expected a port number from 0 to 65535")
    return port


def _parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected a whole number")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError("expected a whole number")


def _parse_positive_int(value: Any) -> int:
    number = _parse_int(value)
    if number < 1:
        raise ValueError("expected a whole number of 1 or more")
    return number


def _parse_count(value: Any) -> int:
    number = _parse_int(value)
    if number < 0:
        raise ValueError("expected a whole number of 0 or more")
    return number


def _parse_positive_float(value: Any) -> float:
    try:
        number = _parse_number(value)
    except ValueError:
        raise ValueError("expected a positive number") from None
    if number <= 0:
        raise ValueError("expected a positive number")
    return number


def _parse_number(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("expected a number") from None
    if not math.isfinite(number):
        raise ValueError("expected a finite number")
    return number


def _parse_fraction(value: Any) -> float:
    number = _parse_positive_float(value)
    if number >= 1:
        raise ValueError("expected a number between 0 and 1")
    return number


def _parse_temperature(value: Any) -> float:
    number = _parse_number(value)
    if not 0 <= number <= 2:
        raise ValueError("expected a number from 0 (greedy) to 2")
    return number


def _parse_top_p(value: Any) -> float:
    number = _parse_number(value)
    if not 0 < number <= 1:
        raise ValueError("expected a number above 0 and at most 1")
    return number


def _parse_tokens(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                raise ValueError("expected a JSON list of strings or a comma-separated list") from None
        else:
            value = [part for part in text.split(",")]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError("expected a list of strings")
    return tuple(item.strip() for item in value if item.strip())


def _parse_url(value: Any) -> str | None:
    text = _parse_optional_str(value)
    if text is None:
        return None
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("expected an http:// or https:// URL")
    if parts.username or parts.password:
        raise ValueError(f"put credentials in {UPSTREAM_API_KEY_ENV}, not in the URL")
    # Clients send the path (`/v1/...`) themselves, so a base URL ending in /v1 would double it.
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return f"{parts.scheme}://{parts.netloc}{path}"


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _parse_str(value).strip().lower()
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    return parse


def _parse_path(value: Any) -> Path:
    return Path(_parse_str(value)).expanduser()


def _parse_optional_path(value: Any) -> Path | None:
    text = _parse_optional_str(value)
    return None if text is None else Path(text).expanduser()


@dataclass(frozen=True)
class Kind:
    """What values a setting takes: the word `--help` shows for them, and the parser that checks them."""

    metavar: str  # PATH makes shells complete file names
    parse: Callable[[Any], Any]


TEXT = Kind("TEXT", _parse_str)
OPTIONAL_TEXT = Kind("TEXT", _parse_optional_str)
PORT = Kind("PORT", _parse_port)
POSITIVE_INT = Kind("INTEGER", _parse_positive_int)
COUNT = Kind("INTEGER", _parse_count)
NUMBER = Kind("NUMBER", _parse_number)
POSITIVE_NUMBER = Kind("NUMBER", _parse_positive_float)
FRACTION = Kind("NUMBER", _parse_fraction)
TEMPERATURE = Kind("NUMBER", _parse_temperature)
TOP_P = Kind("NUMBER", _parse_top_p)
TOKENS = Kind("TOKENS", _parse_tokens)
URL = Kind("URL", _parse_url)
PATH = Kind("PATH", _parse_path)
OPTIONAL_PATH = Kind("PATH", _parse_optional_path)
ENGINE = Kind("ENGINE", _choice("torch", "sglang"))
TRAINER = Kind("TRAINER", _choice("torch", "slime"))
DEVICE = Kind("DEVICE", _choice("auto", "cpu", "cuda"))


def _setting(
    default: Any,
    kind: Kind,
    *,
    env: str | None = None,
    secret: bool = False,
    live: bool = False,
    help: str,
) -> Any:
    """Declare a setting: its default, the values it takes, the environment variable it falls back to, whether it is
    secret (masked by --print-config), whether a reload applies it without a restart, and its help."""
    metadata = {"kind": kind, "env": env, "secret": secret, "live": live, "help": help}
    if isinstance(default, tuple | Path) or default is None or isinstance(default, str | int | float):
        return field(default=default, metadata=metadata)
    raise TypeError("settings defaults must be immutable")


@dataclass(frozen=True)
class ReefSection:
    host: str = _setting(DEFAULT_HOST, TEXT, help="address to bind; keep it on loopback unless you mean it")
    port: int = _setting(DEFAULT_PORT, PORT, help="port to listen on")
    token: str | None = _setting(
        None,
        OPTIONAL_TEXT,
        env=TOKEN_ENV,
        secret=True,
        live=True,
        help="bearer token clients must send",
    )
    tokens: tuple[str, ...] = _setting((), TOKENS, secret=True, live=True, help="more accepted tokens, for rotation")
    state_dir: Path = _setting(DEFAULT_STATE_DIR, PATH, help="where records and releases are kept")
    max_body_mb: float = _setting(64.0, POSITIVE_NUMBER, help="largest request body accepted, in MiB")


@dataclass(frozen=True)
class InferenceSection:
    upstream_url: str | None = _setting(
        None, URL, env=UPSTREAM_URL_ENV, live=True, help="base URL of the model API reef fronts"
    )
    upstream_model: str | None = _setting(
        None, OPTIONAL_TEXT, env=UPSTREAM_MODEL_ENV, live=True, help="the model id served upstream"
    )
    upstream_api_key: str | None = _setting(
        None,
        OPTIONAL_TEXT,
        env=UPSTREAM_API_KEY_ENV,
        secret=True,
        live=True,
        help="key reef sends upstream instead of the client's",
    )
    timeout_s: float = _setting(300.0, POSITIVE_NUMBER, env=INFERENCE_TIMEOUT_ENV, live=True, help="upstream timeout")
    model_path: Path | None = _setting(None, OPTIONAL_PATH, help="a local model for the embedded runtime")
    temperature: float = _setting(
        0.0,
        TEMPERATURE,
        help="embedded runtime: sampling temperature of a request that sets none (0: greedy, see bench/README.md)",
    )
    top_p: float = _setting(1.0, TOP_P, help="embedded runtime: nucleus (top-p) mass of a request that sets none")
    max_tokens: int = _setting(
        512, POSITIVE_INT, help="embedded runtime: the most tokens an answer gets when its request sets no limit"
    )


@dataclass(frozen=True)
class TrainingSection:
    """Knobs of the weight recipes (sao, grpo); the record and harness recipes ignore them."""

    batch_size: int = _setting(1, POSITIVE_INT, env=SAO_BATCH_SIZE_ENV, help="rollouts per step")
    learning_rate: float = _setting(1e-5, POSITIVE_NUMBER, help="policy learning rate (Adam)")
    critic_learning_rate: float = _setting(1e-3, POSITIVE_NUMBER, help="value head learning rate (Adam)")
    critic_steps: int = _setting(2, POSITIVE_INT, help="critic updates per step")
    critic_warmup_steps: int = _setting(2, COUNT, help="critic-only steps before the policy moves")
    max_staleness: int = _setting(0, COUNT, env=MAX_STALENESS_ENV, help="how many weight versions old a rollout may be")
    dis_low: float = _setting(0.3, FRACTION, help="tokens with ratio <= 1 - dis-low are masked")
    dis_high: float = _setting(5.0, POSITIVE_NUMBER, help="tokens with ratio >= 1 + dis-high are masked")
    lambda_alpha: float = _setting(1.5, POSITIVE_NUMBER, help="length-adaptive GAE: lambda = 1 - 1/(a*L)")
    checkpoint_every: int = _setting(10, POSITIVE_INT, help="save a checkpoint release every N steps")
    trainer: str = _setting(
        "torch",
        TRAINER,
        help="what trains: torch (in this process) or slime (a Slime job on Ray, pushing weights into SGLang)",
    )
    device: str = _setting("auto", DEVICE, help="torch trainer: cuda, cpu, or auto (cuda when a GPU is present)")


@dataclass(frozen=True)
class EmbeddedSection:
    """The embedded runtime's engine: the model in this process (torch), or an SGLang server (sglang)."""

    engine: str = _setting(
        "torch",
        ENGINE,
        help="what generates: torch (this process) or sglang (an SGLang server reef launches from "
        "inference.model-path, or attaches to at embedded.sglang-url)",
    )
    sglang_url: str | None = _setting(None, URL, help="attach to the SGLang server (or router) at this URL")
    sglang_port: int = _setting(30000, PORT, help="port of the SGLang server (or Slime's router) reef starts")
    sglang_tp: int = _setting(1, POSITIVE_INT, help="tensor-parallel GPUs of the SGLang server reef launches")
    sglang_mem_fraction: float = _setting(
        0.8, FRACTION, help="share of GPU memory the launched SGLang server takes for weights and cache"
    )
    sglang_start_timeout_s: float = _setting(
        900.0, POSITIVE_NUMBER, help="how long a launched SGLang server may take to answer its health check"
    )


@dataclass(frozen=True)
class SlimeSection:
    """The Slime training job (training.trainer = slime): where Slime is, and the GPUs and ports it takes."""

    path: Path | None = _setting(None, OPTIONAL_PATH, help="the Slime checkout holding train.py")
    actor_gpus: int = _setting(1, POSITIVE_INT, help="GPUs of the Megatron actor (the critic shares them)")
    rollout_gpus: int = _setting(1, POSITIVE_INT, help="GPUs of the SGLang engines Slime starts")
    num_rollout: int = _setting(1000, POSITIVE_INT, help="training steps the Slime job runs before it ends")
    ray_port: int = _setting(6379, PORT, help="port of the Ray head reef starts")
    ray_dashboard_port: int = _setting(8265, PORT, help="port of the Ray dashboard (jobs are submitted through it)")
    model_args: tuple[str, ...] = _setting(
        (), TOKENS, help="Megatron architecture flags Slime needs for the model (e.g. --num-layers 28 ...)"
    )


@dataclass(frozen=True)
class HarnessSection:
    """Knobs of the harness recipe (reefine)."""

    adapter: str = _setting(
        "pi",
        TEXT,
        env=HARNESS_ADAPTER_ENV,
        help="the agent a harness recipe renders for: pi, codex, dsh, claude or opencode",
    )
    max_tokens: int = _setting(
        8192,
        POSITIVE_INT,
        help="the most tokens the proposer asks the model for in one answer (unset: 512 with the embedded model)",
    )
    trial: str = _setting(
        "auto",
        TEXT,
        help="before publishing, start the agent on the candidate once: auto (where the adapter's binary is on "
        "PATH), off, or the binary's path",
    )
    sandbox: str = _setting(
        "bwrap",
        TEXT,
        env=PROPOSER_SANDBOX_ENV,
        help="where trial runs execute: bwrap (a bubblewrap jail: no network, read-only files) or none (a plain "
        "child, for a trusted machine)",
    )
    trial_timeout_s: float = _setting(
        180.0, POSITIVE_NUMBER, help="how long the trial run may take before it counts as failed"
    )
    proposer_agent: str = _setting(
        "pi",
        TEXT,
        help="the agent that proposes changes as a coding agent (pi, codex, ...; off: never); the text proposer "
        "answers where it is not installed or the jail does not start",
    )
    proposer_wall_s: float = _setting(900.0, POSITIVE_NUMBER, help="the most seconds one agent proposer run may take")
    proposer_trial_s: float = _setting(
        120.0, POSITIVE_NUMBER, help="the most seconds one harness-trial of the agent proposer may take"
    )
    proposer_model_calls: int = _setting(
        200, POSITIVE_INT, help="the most model calls one agent proposer run may make, its trials included"
    )
    proposer_trials: int = _setting(10, POSITIVE_INT, help="the most harness-trial runs in one agent proposer run")
    gate_max_worse: int = _setting(
        0, COUNT, help="the evaluation gate publishes a candidate only if at most this many protected tasks got worse"
    )
    eval_wall_s: float = _setting(
        900.0, POSITIVE_NUMBER, help="the most seconds the evaluation gate spends on one candidate, all runs together"
    )
    eval_model_calls: int = _setting(
        200, POSITIVE_INT, help="the most model calls the evaluation gate may make for one candidate (agents and judge)"
    )
    eval_parallel: int = _setting(
        2,
        POSITIVE_INT,
        help="how many tasks the evaluation gate runs at once, each on the served version and the candidate side by "
        "side (so twice as many agent runs in flight)",
    )
    replays: int = _setting(
        3,
        COUNT,
        help="how many of a scenario's most recent low-scored conversations are replayed as evaluation tasks (0: none)",
    )
    canary_min_scored: int = _setting(
        20,
        POSITIVE_INT,
        help="scored records a canary and the served version each need before a canary whose 95% score interval "
        "lies wholly below the served one's is rolled back automatically",
    )


@dataclass(frozen=True)
class ReportsSection:
    """What a report may say: the one score scale every client uses (`reef score`, `--from`, the TUI's keys, HTTP)."""

    score_min: float = _setting(0.0, NUMBER, help="the worst score a report may give")
    score_max: float = _setting(1.0, NUMBER, help="the best score a report may give")


SECTIONS: dict[str, type[Any]] = {
    "reef": ReefSection,
    "inference": InferenceSection,
    "training": TrainingSection,
    "harness": HarnessSection,
    "reports": ReportsSection,
    "embedded": EmbeddedSection,
    "slime": SlimeSection,
}


@dataclass(frozen=True)
class Settings:
    """Every setting of a daemon, with where each value came from."""

    reef: ReefSection = field(default_factory=ReefSection)
    inference: InferenceSection = field(default_factory=InferenceSection)
    training: TrainingSection = field(default_factory=TrainingSection)
    harness: HarnessSection = field(default_factory=HarnessSection)
    reports: ReportsSection = field(default_factory=ReportsSection)
    embedded: EmbeddedSection = field(default_factory=EmbeddedSection)
    slime: SlimeSection = field(default_factory=SlimeSection)
    recipe: str = _setting("record", TEXT, help="recipe name or package.module:Class")
    sources: Mapping[str, str] = field(default_factory=dict)
    config_file: Path | None = None

    @property
    def accepted_tokens(self) -> tuple[str, ...]:
        tokens = ((self.reef.token,) if self.reef.token else ()) + self.reef.tokens
        return tuple(dict.fromkeys(tokens))

    def value(self, key: str) -> Any:
        info = CATALOGUE[key]
        if not info.section:
            return getattr(self, info.attr)
        return getattr(getattr(self, info.section), info.attr)

    def describe(self) -> list[tuple[str, str, str]]:
        """(key, shown value, source) for every setting; secrets are masked."""
        rows = []
        for key, info in CATALOGUE.items():
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


def _catalogue() -> dict[str, SettingInfo]:
    infos: dict[str, SettingInfo] = {}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            key = f"{section}.{f.name.replace('_', '-')}"
            infos[key] = SettingInfo(key, section, f.name, f.default, **f.metadata)
    for f in dataclasses.fields(Settings):
        if "kind" in f.metadata:
            infos[f.name] = SettingInfo(f.name, "", f.name, f.default, **f.metadata)
    return infos


CATALOGUE = _catalogue()


def canonical_key(raw: str) -> str:
    """`reef.state_dir`, `reef.state-dir` and `--reef.state-dir` all name `reef.state-dir`."""
    key = raw.lstrip("-").strip().replace("_", "-").lower()
    if key not in CATALOGUE:
        close = difflib.get_close_matches(key, CATALOGUE, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise SettingsError(f"unknown setting '{raw}'{hint}; accepted: {', '.join(CATALOGUE)}")
    return key


def _flatten_file(data: Mapping[str, Any], path: Path) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for top, value in data.items():
        if not isinstance(top, str):
            raise SettingsError(f"{path}: keys must be strings, found {top!r}")
        if isinstance(value, Mapping):
            for sub, inner in value.items():
                flat[canonical_key(f"{top}.{sub}")] = inner
        else:
            flat[canonical_key(top)] = value
    return flat


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a TOML or YAML file into canonical dotted keys."""
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
    return _flatten_file(data, path)


def load_settings(
    *,
    config_file: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    profile: Mapping[str, Any] | None = None,
) -> Settings:
    """Assemble settings: command line > file > environment > the recipe's profile > default."""
    environ = os.environ if environ is None else environ
    chosen: dict[str, tuple[Any, str]] = {}
    for key, value in (profile or {}).items():
        chosen[canonical_key(key)] = (value, "recipe profile")
    for key, info in CATALOGUE.items():
        if info.env and environ.get(info.env, "").strip():
            chosen[key] = (environ[info.env], f"environment ({info.env})")
    if config_file is not None:
        for key, value in read_config_file(config_file).items():
            chosen[key] = (value, "file")
    for key, value in (overrides or {}).items():
        chosen[canonical_key(key)] = (value, "command line")

    sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    top: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, (raw, source) in chosen.items():
        info = CATALOGUE[key]
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
        training=TrainingSection(**sections["training"]),
        harness=HarnessSection(**sections["harness"]),
        reports=reports,
        embedded=EmbeddedSection(**sections["embedded"]),
        slime=SlimeSection(**sections["slime"]),
        sources=sources,
        config_file=config_file,
        **top,
    )


def live_changes(old: Settings, new: Settings) -> tuple[list[str], list[str]]:
    """Keys that changed between two loads: (applied without a restart, needing a restart)."""
    live: list[str] = []
    restart: list[str] = []
    for key, info in CATALOGUE.items():
        if old.value(key) != new.value(key):
            (live if info.live else restart).append(key)
    return live, restart


def with_live_values(current: Settings, fresh: Settings) -> Settings:
    """`current` with only the live settings (tokens, upstream) taken from `fresh`."""
    sections: dict[str, Any] = {}
    for name in SECTIONS:
        changes = {
            info.attr: getattr(getattr(fresh, name), info.attr)
            for info in CATALOGUE.values()
            if info.section == name and info.live
        }
        sections[name] = dataclasses.replace(getattr(current, name), **changes)
    sources = dict(current.sources)
    for key, info in CATALOGUE.items():
        if info.live:
            if key in fresh.sources:
                sources[key] = fresh.sources[key]
            else:
                sources.pop(key, None)
    return dataclasses.replace(current, sources=sources, **sections)
