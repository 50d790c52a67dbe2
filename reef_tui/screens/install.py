"""Installing a release for an agent: pick the adapter, then the daemon's install script runs here with `sh`,
as `reef install` runs it; its output is shown."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, ClassVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from reef_client import ApiError, ReefClientError, run_install_script

if TYPE_CHECKING:
    from reef_tui.app import ReefApp

SCRIPT_TIMEOUT_S = 300


class InstallScreen(ModalScreen[None]):
    """Choose an adapter with enter; the install runs at once (the choice is the confirmation)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss", "Close")]

    def __init__(self, scenario: str, release_id: str, version: str) -> None:
        super().__init__()
        self.scenario = scenario
        self.release_id = release_id
        self.version = version

    @property
    def reef(self) -> ReefApp:
        return cast("ReefApp", self.app)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label(f"Install {self.scenario} {self.version} for which agent?", classes="dialog-title")
            yield OptionList(id="adapters")
            with VerticalScroll(id="install-output"):
                yield Static(id="install-log")
            yield Label("enter installs · escape closes", classes="dialog-hint")

    def on_mount(self) -> None:
        self.run_worker(self._load_adapters, thread=True)

    def _load_adapters(self) -> None:
        try:
            adapters = self.reef.client.adapters()
        except ReefClientError as exc:
            self.app.call_from_thread(self._say, exc.message, True)
            return
        options = [Option(f"{row['name']}  {row.get('title', '')}", id=str(row["name"])) for row in adapters]
        self.app.call_from_thread(self._offer, options)

    def _offer(self, options: list[Option]) -> None:
        """List the adapters with the first highlighted and the list focused: enter installs at once."""
        adapters = self.query_one(OptionList)
        adapters.add_options(options)
        if options:
            adapters.highlighted = 0
        adapters.focus()

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        adapter = str(message.option.id)
        self._say(f"installing for {adapter} …", False)
        self.run_worker(lambda: self._install(adapter), thread=True, exclusive=True)

    def _install(self, adapter: str) -> None:
        try:
            script = self.reef.client.install_script(self.scenario, adapter, self.release_id)
        except ApiError as exc:
            missing = exc.status == 404
            sentence = "this daemon has no install route (GET /reef/harness/install) yet" if missing else exc.message
            self.app.call_from_thread(self._say, sentence, True)
            return
        except ReefClientError as exc:
            self.app.call_from_thread(self._say, exc.message, True)
            return
        try:
            done = run_install_script(
                script, self.reef.token, root_how="with reef install --root", capture=True, timeout_s=SCRIPT_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            self.app.call_from_thread(
                self._say, f"the install script ran past {SCRIPT_TIMEOUT_S} s and was stopped", True
            )
            return
        output = (done.stdout + done.stderr).strip() or "(no output)"
        verdict = "installed" if done.returncode == 0 else f"the install script failed (exit {done.returncode})"
        self.app.call_from_thread(self._say, f"{verdict}\n\n{output}", done.returncode != 0)

    def _say(self, text: str, error: bool) -> None:
        self.query_one("#install-log", Static).update(Text(text, style="red" if error else ""))
