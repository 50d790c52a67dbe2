"""reef's daemon: a recording proxy in front of a model, with reports, scenarios, events and recipes."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("reef-infra")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
