"""How a setting is declared and the values it takes: `setting(...)` makes one field of a section (a frozen
dataclass), and each `Kind` parses a value from the command line, a config file or the environment. The daemon's
sections (`settings`), its harness section (`harness.settings`) and the recipes' sections use these."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from reef_contract import REPORT_SOURCES, UPSTREAM_API_KEY_ENV


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


def _parse_kappa(value: Any) -> float:
    number = _parse_number(value)
    if not -1 <= number <= 1:
        raise ValueError("expected a Cohen's kappa, from -1 (always opposite) to 1 (always the same)")
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


def _parse_sources(value: Any) -> tuple[str, ...]:
    """`all`, or some of the report sources (a comma-separated list or a list); kept in the contract's order."""
    named = _parse_tokens(value)
    if not named or "all" in named:
        return REPORT_SOURCES
    unknown = [name for name in named if name not in REPORT_SOURCES]
    if unknown:
        raise ValueError(
            f"unknown report source {', '.join(unknown)}; expected all, or some of {', '.join(REPORT_SOURCES)}"
        )
    return tuple(source for source in REPORT_SOURCES if source in named)


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


def _parse_chat_endpoint(value: Any) -> str | None:
    """A chat-completions endpoint as its base URL: `…/v1/chat/completions`, `…/v1` and the base itself all name
    the same endpoint (reef adds the route's path)."""
    text = _parse_optional_str(value)
    if text is None:
        return None
    parts = urlsplit(text)
    path = parts.path.rstrip("/").removesuffix("/chat/completions")
    return _parse_url(urlunsplit(parts._replace(path=path)))


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _parse_str(value).strip().lower()
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    return parse


def _parse_store_url(value: Any) -> str | None:
    text = _parse_optional_str(value)
    if text is None:
        return None
    if not text.startswith(("postgresql://", "postgres://", "sqlite:")):
        raise ValueError("expected a postgresql://… URL (or sqlite:PATH)")
    return text


_SIZES = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_AGES = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _parse_optional_size(value: Any) -> int | None:
    text = _parse_optional_str(value)
    if text is None:
        return None
    number, unit = text.upper().removesuffix("B").removesuffix("I"), ""
    if number and number[-1] in "KMGT":
        number, unit = number[:-1], number[-1]
    try:
        size = float(number) * _SIZES[unit]
    except ValueError:
        raise ValueError("expected a size such as 500M or 20G") from None
    if not math.isfinite(size) or size <= 0:
        raise ValueError("expected a size above 0, such as 500M or 20G")
    return int(size)


def _parse_size(value: Any) -> int:
    size = _parse_optional_size(value)
    if size is None:
        raise ValueError("expected a size such as 16M or 1G")
    return size


def _parse_optional_age(value: Any) -> float | None:
    text = _parse_optional_str(value)
    if text is None:
        return None
    number, unit = text, ""
    if number and number[-1] in "smhd":
        number, unit = number[:-1], number[-1]
    try:
        age = float(number) * _AGES[unit]
    except ValueError:
        raise ValueError("expected an age such as 30d, 12h or 3600 (seconds)") from None
    if not math.isfinite(age) or age <= 0:
        raise ValueError("expected an age above 0, such as 30d or 12h")
    return age


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
    choices: tuple[str, ...] = ()  # the words it takes, where it takes only a few (shells complete them)


TEXT = Kind("TEXT", _parse_str)
OPTIONAL_TEXT = Kind("TEXT", _parse_optional_str)
PORT = Kind("PORT", _parse_port)
POSITIVE_INT = Kind("INTEGER", _parse_positive_int)
COUNT = Kind("INTEGER", _parse_count)
NUMBER = Kind("NUMBER", _parse_number)
POSITIVE_NUMBER = Kind("NUMBER", _parse_positive_float)
FRACTION = Kind("NUMBER", _parse_fraction)
KAPPA = Kind("NUMBER", _parse_kappa)
TEMPERATURE = Kind("NUMBER", _parse_temperature)
TOP_P = Kind("NUMBER", _parse_top_p)
TOKENS = Kind("TOKENS", _parse_tokens)
SOURCES = Kind("SOURCES", _parse_sources)
URL = Kind("URL", _parse_url)
CHAT_ENDPOINT = Kind("URL", _parse_chat_endpoint)
PATH = Kind("PATH", _parse_path)
OPTIONAL_PATH = Kind("PATH", _parse_optional_path)
STORE_URL = Kind("URL", _parse_store_url)
SIZE = Kind("SIZE", _parse_optional_size)
BYTES = Kind("SIZE", _parse_size)
AGE = Kind("AGE", _parse_optional_age)


def _parse_otlp_endpoint(value: Any) -> str | None:
    text = _parse_optional_str(value)
    if text is None:
        return None
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("expected the collector's base http:// or https:// URL (reef adds /v1/traces)")
    return text


OTLP_ENDPOINT = Kind("URL", _parse_otlp_endpoint)


def one_of(metavar: str, *choices: str) -> Kind:
    """A kind of setting that takes one of a few words (any case), shown in `--help` as `metavar`."""
    return Kind(metavar, _choice(*choices), choices)


ENGINE = one_of("ENGINE", "torch", "sglang")
DECODE_WEIGHTS = one_of("FORMAT", "auto", "fp16", "int8")
SWITCH = one_of("on|off", "on", "off")
CLIENT_AUTH = one_of("reef|pass", "reef", "pass")


def setting(
    default: Any,
    kind: Kind,
    *,
    env: str | None = None,
    secret: bool = False,
    live: bool = False,
    help: str,
) -> Any:
    """Declare a setting, as a field of a frozen dataclass that is one section of settings.

    Args:
        default: the value when nothing sets it; immutable (a str, number, tuple, Path or None).
        kind: the values it takes (`TEXT`, `POSITIVE_INT`, `one_of(...)` ...).
        env: the environment variable it falls back to, if any.
        secret: masked by `--print-config`.
        live: a reload applies it without a restart.
        help: one line for `--help`.

    Returns:
        The dataclass field.
    """
    metadata = {"kind": kind, "env": env, "secret": secret, "live": live, "help": help}
    if isinstance(default, tuple | Path) or default is None or isinstance(default, str | int | float):
        return field(default=default, metadata=metadata)
    raise TypeError("settings defaults must be immutable")
