"""Following the daemon: one background thread reads `GET /reef/events` and tells the app what happened —
connected (with the daemon's status), an event, or gone. When the daemon goes away it retries by itself and
resumes after the last event it saw, so nothing committed in between is missed."""

from __future__ import annotations

import threading

from textual.message import Message
from textual.message_pump import MessagePump

from reef_client import Event, ReefClient, ReefClientError, Status

RETRY_PAUSES_S = (0.5, 1.0, 2.0, 5.0)


class DaemonConnected(Message):
    """The daemon answered; `status` is its `GET /reef/status`."""

    def __init__(self, status: Status) -> None:
        super().__init__()
        self.status = status


class DaemonGone(Message):
    """The daemon stopped answering (or refused us); `reason` says why in one sentence."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class DaemonEvent(Message):
    """One committed event from `GET /reef/events`."""

    def __init__(self, event: Event) -> None:
        super().__init__()
        self.event = event


class EventFollower:
    """Reads the event stream on a daemon thread and posts DaemonConnected / DaemonEvent / DaemonGone to `target`.

    A plain daemon thread rather than a Textual worker: the stream blocks in a socket read between events, and a
    worker thread would hold the process open at exit until the next keep-alive.
    """

    def __init__(self, url: str, token: str | None, target: MessagePump) -> None:
        self._client = ReefClient(url, token)
        self._target = target
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reef-events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end; it does at its next wake (an event, a failure or a retry pause)."""
        self._stopped.set()

    def _run(self) -> None:
        try:
            self._follow()
        finally:
            self._client.close()

    def _follow(self) -> None:
        last: int | None = None
        failures = 0
        while not self._stopped.is_set():
            try:
                status = self._client.status()
                if last is None:
                    newest = self._client.records(limit=1)["records"]
                    last = newest[0]["sequence"] if newest else 0
                self._target.post_message(DaemonConnected(status))
                failures = 0
                for event in self._client.events(after=last):
                    if self._stopped.is_set():
                        return
                    last = event.sequence
                    self._target.post_message(DaemonEvent(event))
            except ReefClientError as exc:
                if self._stopped.is_set():
                    return
                self._target.post_message(DaemonGone(exc.message))
                self._stopped.wait(RETRY_PAUSES_S[min(failures, len(RETRY_PAUSES_S) - 1)])
                failures += 1
