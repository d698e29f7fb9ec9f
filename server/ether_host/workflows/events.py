"""The event log of a live run: recent events in memory, every event in the store.

Followers read from a sequence number: what the memory ring no longer holds
comes from the store, the rest from memory, then they wait for more. The log
closes after the run's ``run_completed`` event; followers end once they have
read it. No writer ever waits for a reader.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable

import anyio

from ether_host.workflows.model import RunEvent
from ether_host.workflows.store import RunStore

MEMORY = 4096
PAGE = 1000


class EventLog:
    """Numbered events of one run, continuing after ``last_sequence``."""

    def __init__(
        self, run_id: str, store: RunStore, last_sequence: int, capacity: int = MEMORY
    ) -> None:
        self.run_id = run_id
        self._store = store
        self._items: deque[RunEvent] = deque(maxlen=capacity)
        self.last = last_sequence
        self.closed = False
        self._grown = anyio.Event()

    def append(self, event: RunEvent) -> None:
        self.last = event.sequence
        self._items.append(event)
        self._store.add_event(self.run_id, event)
        self.wake()

    def close(self) -> None:
        self.closed = True
        self.wake()

    def wake(self) -> None:
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
            held = self._held_after(cursor)
            oldest = held[0].sequence if held else self.last + 1
            if cursor + 1 < oldest:  # fell behind the ring: read the gap from the store
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
