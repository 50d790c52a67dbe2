"""The live events bus: committed events fan out to `GET /reef/events` subscribers.

A subscriber that falls too far behind is dropped rather than slowing anyone down; its stream ends and the
client resumes with `Last-Event-ID`, which replays from the database.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable

from reef_contract import EventName
from reef_daemon.store import Event

SUBSCRIBER_BACKLOG = 10_000


class Subscription:
    """One subscriber's queue: the events of its scenario (or all), of the types it asked for (or all)."""

    def __init__(self, bus: EventBus, scenario: str | None, types: frozenset[EventName] | None) -> None:
        self._bus = bus
        self.scenario = scenario
        self.types = types
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(SUBSCRIBER_BACKLOG)
        self.lost = 0  # events it never got when it fell behind: its backlog, and the one that did not fit

    def offer(self, event: Event) -> bool:
        if self.scenario is not None and event.scenario != self.scenario:
            return True
        if self.types is not None and event.type not in self.types:
            return True
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            return False
        return True

    async def next(self) -> Event | None:
        """The next event, or None when the subscription was closed."""
        return await self.queue.get()

    def close(self) -> None:
        self._bus.unsubscribe(self)


class EventBus:
    def __init__(self) -> None:
        self._subscribers: set[Subscription] = set()

    def subscribe(self, scenario: str | None = None, types: Iterable[EventName] | None = None) -> Subscription:
        """A queue of what is published from now on; an in-daemon listener names the types it acts on, so the
        events it would ignore (one per proxied exchange) never wake it."""
        subscription = Subscription(self, scenario, frozenset(types) if types is not None else None)
        self._subscribers.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)

    def publish(self, events: Iterable[Event]) -> None:
        for event in events:
            for subscription in list(self._subscribers):
                if not subscription.offer(event):
                    subscription.lost = subscription.queue.qsize() + 1
                    self._drop(subscription)

    def close_all(self) -> None:
        for subscription in list(self._subscribers):
            self._drop(subscription)

    def _drop(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)
        while not subscription.queue.empty():
            subscription.queue.get_nowait()
        subscription.queue.put_nowait(None)


def sse_frame(event: Event) -> bytes:
    """One SSE frame: `event:`, `id:` and a JSON `data:` line carrying type, sequence and scenario."""
    data = {"type": event.type, "sequence": event.sequence, "scenario": event.scenario, **event.data}
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"event: {event.type}\nid: {event.sequence}\ndata: {body}\n\n".encode()
