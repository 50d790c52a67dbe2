"""Change requests for one scenario: file one, watch its state and activity live, see its result, version and
how-to-use text. Where the daemon takes no request (a recipe that evolves no harness, a scenario in auto mode)
the screen says so up front and offers no `n`."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable
from textual.worker import get_current_worker

from reef_client import Event, ReefClientError, RequestProgress, small_model_caution
from reef_client.render import formats
from reef_tui.bindings import HELP
from reef_tui.screens.new_request import NewRequestScreen
from reef_tui.screens.scenario_screen import ScenarioScreen
from reef_tui.widgets.request_view import RequestView

SHOWN = 50  # the newest requests listed
COLUMNS = ("filed", "state", "result", "version", "request")


class RequestsScreen(ScenarioScreen[list[RequestProgress]]):
    """A table of requests over the selected one's progress."""

    SUB_TITLE = "requests"
    HELP_TITLE = "Requests"
    NAME = "requests"
    BINDINGS: ClassVar[list[BindingType]] = [
        HELP,
        Binding("n", "new_request", "New request"),
        Binding("ctrl+r", "reload", "Reload", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.progress: dict[str, RequestProgress] = {}

    def compose_scenario(self) -> ComposeResult:
        table: DataTable[str] = DataTable(id="requests-table", cursor_type="row")
        table.add_columns(*COLUMNS)
        yield table
        with VerticalScroll(id="request-scroll"):
            yield RequestView(id="request-view")

    def refusal(self) -> str | None:
        """Why the daemon would refuse a change request for the scenario; None when it would take one."""
        status = self.reef.daemon_status
        if status is None:
            return "waiting for the daemon"
        recipe = status["recipe"]
        if not recipe.get("harness"):
            return f"the {recipe['name']} recipe takes none (reefine does)"
        counts = status["scenarios"].get(self.scenario or "")
        if counts is not None and counts.get("training_mode") == "auto":
            return "auto mode takes none; switch the scenario to manual or hybrid"
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # No `n` in the footer or the palette where the request would be refused.
        return self.refusal() is None if action == "new_request" else True

    def heading(self, scenario: str) -> str:
        self.refresh_bindings()
        refusal = self.refusal()
        return f"change requests for [b]{scenario}[/b]: " + (refusal or "n files one")

    def _on_connection(self, connected: bool | None) -> None:
        if connected:
            self.reload()  # the recipe decides whether `n` is offered

    def say_no_scenario(self) -> None:
        hint = "send a request with the x-reef-scenario header, then come back; s picks a scenario"
        self.query_one(RequestView).say(hint)

    def fetch(self, scenario: str) -> list[RequestProgress]:
        rows = self.reef.client.records(scenario=scenario, type="request", limit=SHOWN)["records"]
        return [self.reef.client.request_progress(row["id"]) for row in rows]

    def show_error(self, message: str) -> None:
        self.query_one(RequestView).say(message, error=True)

    def show_loaded(self, scenario: str, progress: list[RequestProgress]) -> None:
        self.progress = {str(entry["id"]): entry for entry in progress}
        self._fill(keep_cursor=False)
        selected = self._selected()
        if selected is not None:
            self.query_one(RequestView).show(self.progress[selected])
        else:
            refusal = self.refusal()
            hint = f"no change requests: {refusal}" if refusal else "no change requests yet: press n to file one"
            self.query_one(RequestView).say(hint)

    def _put(self, progress: RequestProgress) -> None:
        """Add or update one request's row; refresh the panel when it is the selected one."""
        table: DataTable[str] = self.query_one(DataTable)
        request_id = str(progress["id"])
        known = request_id in self.progress
        self.progress[request_id] = progress
        if known:
            for column, value in zip(table.columns, _cells(progress), strict=True):
                table.update_cell(request_id, column, value, update_width=True)  # "skipped" outgrows "-"
        else:
            self._fill(keep_cursor=True)
        if self._selected() == request_id or len(self.progress) == 1:
            self.query_one(RequestView).show(progress)

    def _fill(self, *, keep_cursor: bool) -> None:
        """Every request's row, newest first; the cursor stays on the request it was on when `keep_cursor`."""
        table: DataTable[str] = self.query_one(DataTable)
        selected = self._selected() if keep_cursor else None
        table.clear()
        for entry in sorted(self.progress.values(), key=_created, reverse=True):
            table.add_row(*_cells(entry), key=str(entry["id"]))
        if selected is not None:
            table.move_cursor(row=table.get_row_index(selected))

    def _selected(self) -> str | None:
        table: DataTable[str] = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return str(key.value)

    def on_data_table_row_highlighted(self, message: DataTable.RowHighlighted) -> None:
        progress = self.progress.get(str(message.row_key.value))
        if progress is not None:
            self.query_one(RequestView).show(progress)

    # --- live -----------------------------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if self.scenario is None or event.scenario != self.scenario:
            return
        request = event.request
        if request is not None:
            self._refresh(request["id"])
        elif event.type in ("step", "release"):
            for request_id, progress in self.progress.items():
                if progress.get("state") != "settled":
                    self._refresh(request_id)

    def _refresh(self, request_id: str) -> None:
        """Fetch the request's progress again. A newer fetch cancels the one before it: read on threads, an older
        answer could land after the newer one and leave the screen showing a state the request has left."""

        def work() -> None:
            worker = get_current_worker()
            try:
                progress = self.reef.client.request_progress(request_id)
            except ReefClientError as exc:
                self.app.call_from_thread(self.notify, exc.message, severity="error")
                return
            # Checked on the app's thread, where a newer fetch cancels this one as it starts.
            self.app.call_from_thread(lambda: None if worker.is_cancelled else self._put(progress))

        self.run_worker(work, thread=True, group=f"request-{request_id}", exclusive=True)

    # --- filing ---------------------------------------------------------------------------------------------

    def action_new_request(self) -> None:
        scenario = self.scenario
        if scenario is None:
            self.notify("no scenario to file a request for yet", severity="warning")
            return

        def file(text: str | None) -> None:
            if text:
                self.run_worker(lambda: self._file(scenario, text), thread=True, group="file")

        status = self.reef.daemon_status
        caution = small_model_caution(status["runtime"]) if status is not None else None
        self.app.push_screen(NewRequestScreen(scenario, caution), file)

    def _file(self, scenario: str, text: str) -> None:
        try:
            answer = self.reef.client.file_request(scenario, text)
            progress = self.reef.client.request_progress(answer["agent_record_id"])
        except ReefClientError as exc:
            self.app.call_from_thread(self.notify, exc.message, title="request refused", severity="error")
            return
        self.app.call_from_thread(self._filed, progress)

    def _filed(self, progress: RequestProgress) -> None:
        self._put(progress)
        table: DataTable[str] = self.query_one(DataTable)
        table.move_cursor(row=table.get_row_index(str(progress["id"])))
        self.notify(f"request {progress['id'][:8]} filed", timeout=2)


def _cells(progress: RequestProgress) -> tuple[str, ...]:
    return (
        formats.clock(progress.get("created_at")),
        str(progress.get("state")),
        str(progress.get("result") or formats.MISSING),
        str(progress.get("version") or formats.MISSING),
        str(progress.get("text") or ""),
    )


def _created(progress: RequestProgress) -> float:
    return float(progress.get("created_at") or 0.0)
