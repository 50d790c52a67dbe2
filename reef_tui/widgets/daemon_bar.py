"""The line under the header: which daemon, its recipe, runtime and model — or, when it has gone away, that it
has, while the screen keeps showing what it had."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.widgets import Static

from reef_client import Status

if TYPE_CHECKING:
    from reef_tui.app import ReefApp


def describe(url: str, status: Status, width: int | None = None) -> Text:
    """`url · recipe R · runtime K · model M` (weights W when the runtime reports a weight version). Where that is
    wider than `width`, the runtime goes first, then the URL's scheme, then the URL: the model stays in view."""
    recipe = (status.get("recipe") or {}).get("name", "?")
    runtime = status.get("runtime") or {}
    model = [f"model {runtime.get('model') or 'chosen by clients'}"]
    if runtime.get("weight_version") is not None:
        model.append(f"weights {runtime['weight_version']}")
    bare = url.split("://", 1)[-1]
    variants = [
        [url, f"recipe {recipe}", f"runtime {runtime.get('kind', '?')}", *model],
        [url, f"recipe {recipe}", *model],
        [bare, f"recipe {recipe}", *model],
        [f"recipe {recipe}", *model],
    ]
    lines = [" · ".join(parts) for parts in variants]
    chosen = next((line for line in lines if width is None or len(line) <= width), lines[-1])
    return Text(chosen, no_wrap=True, overflow="ellipsis")


class DaemonBar(Static):
    """Follows the app's connection state and the daemon's status."""

    def on_mount(self) -> None:
        self.watch(self.app, "connected", self._show, init=True)
        self.watch(self.app, "daemon_status", lambda _status: self._show(cast("ReefApp", self.app).connected))

    def on_resize(self) -> None:
        self._show(cast("ReefApp", self.app).connected)  # what fits depends on the width

    def _show(self, connected: bool | None) -> None:
        app = cast("ReefApp", self.app)
        self.set_class(connected is False, "-gone")
        if connected is None:
            self.update(Text(f"connecting to {app.url} …", no_wrap=True, overflow="ellipsis"))
        elif connected and app.daemon_status is not None:  # set before `connected` is
            self.update(describe(app.url, app.daemon_status, self.content_region.width or None))
        else:
            self.update(Text(f"✗ {app.gone_reason} — showing what was loaded; reconnecting"))
