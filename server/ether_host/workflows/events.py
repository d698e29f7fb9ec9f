"""The event log of a live run: recent events in memory, every event in the store.

Followers read from a sequence number: what the memory ring no longer holds
comes from the store, the rest from memory, then they wait for more. The log
closes after the run's ``run_completed`` event; followers end once they have
read it. No writer ever waits for a reader. Events reach the store through the
run's pending writes (writes.py), in batches; a follower that fell behind the
ring hands them over first, so the store holds everything before the ring.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from ether_host.workflows.model import RunEvent
from ether_host.workflows.store import RunStore
from ether_host.workflows.writes import PendingWrites

MEMORY = 4096
PAGE = 1000


class EventLog:
    """Numbered events of one run, continuing after ``last_sequence``."""

    def __init__(
        self,
        run_id: str,
        store: RunStore,
        last_sequence: int,
        writes: PendingWrites,
        capacity: int = MEMORY,
    ) -> None:
        self.run_id = run_id
        self._store = store
        self._writes = writes
        self._items: deque[RunEvent] = deque(maxlen=capacity)
        self.last = last_sequence
        self.closed = False
        self._grown = anyio.Event()
        self._watched = False  # a follower holds _grown: the next append must set it

    def append(self, event: RunEvent) -> None:
        self.last = event.sequence
        self._items.append(event)
        self._writes.event(event)
        if self._watched:
            self.wake()

    def close(self) -> None:
        self.closed = True
        self.wake()

    def wake(self) -> None:
        # A new Event only once a follower waited on this one: a map stage appends two events
        # per task, mostly with nobody following.
        self._watched = False
        self._grown.set()
        self._grown = anyio.Event()

    def _held_after(self, cursor: int) -> list[RunEvent]:
        if not self._items or cursor >= self.last:
            return []
        first = self._items[0].sequence
        start = max(0, cursor + 1 - first)
        return [self._items[i] for i in range(start, len(self._items))]

    async def follow(self, after: int, stop: Callable[[], bool]) -> AsyncIterator[RunEvent]:
        """Events after ``after`` in order, then new ones, until the log closes or ``stop()``."""
        cursor = after
        while True:
            grown = self._grown
            self._watched = True  # an append from here on sets ``grown``
            held = self._held_after(cursor)
            oldest = held[0].sequence if held else self.last + 1
            if cursor + 1 < oldest:  # fell behind the ring: read the gap from the store
                self._writes.flush()
                await self._store.flush()
                older = await anyio.to_thread.run_sync(
                    self._store.events, self.run_id, cursor, oldest - 1, PAGE
                )
                if not older:
                    cursor = oldest - 1  # never written (a store failure): skip, the gap shows
                for event in older:
                    cursor = event.sequence
                    yield event
                continue
            for event in held:
                cursor = event.sequence
                yield event
            if self.closed and cursor >= self.last:
                return
            if stop():
                return
            await grown.wait()


def detail_body(task_id: str, stage: str, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A ``task_progress`` event's body from a task's progress or log frame."""
    body: dict[str, Any] = {"task_id": task_id, "stage": stage}
    if kind == "progress":
        body["progress"] = {
            "progress": float(payload.get("progress") or 0),
            "total": float(payload.get("total") or 0),
            "message": str(payload.get("message") or ""),
        }
    else:
        body["log"] = {
            "level": str(payload.get("level") or "info"),
            "message": str(payload.get("msg") or ""),
            "fields": payload.get("fields") if isinstance(payload.get("fields"), dict) else {},
        }
    return body
