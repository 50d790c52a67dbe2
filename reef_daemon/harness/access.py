"""How routes reach the harness of the deployment: only a harness recipe has one."""

from __future__ import annotations

from reef_daemon.context import Daemon
from reef_daemon.errors import Unsupported
from reef_daemon.harness.host import HarnessHost
from reef_daemon.harness.progress import RequestProgress


def harness_of(daemon: Daemon) -> tuple[HarnessHost, RequestProgress]:
    """The deployment's harness and request progress; 501 when its recipe does not evolve a harness."""
    harness = getattr(daemon.recipe, "harness", None)
    progress = getattr(daemon.recipe, "progress", None)
    if not isinstance(harness, HarnessHost) or not isinstance(progress, RequestProgress):
        raise Unsupported(
            f"the {daemon.recipe.name} recipe does not evolve a harness; serve with --recipe reefine",
            type="no_harness",
        )
    return harness, progress
