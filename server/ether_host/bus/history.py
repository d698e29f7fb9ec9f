"""A bounded, numbered history that many readers follow without per-reader queues.

Writers append; each item gets the next sequence number (from 1). A reader
asks for everything after a sequence number and then waits for more. Memory
is bounded by ``capacity``: a reader that falls further behind than that
skips ahead (it sees the gap in the sequence numbers). No writer ever waits
for a reader.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, Callable
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")


class History(Generic[T]):
    """Append-only ring of (sequence, item) with async followers."""

    def __init__(self, capacity: int = 1000) -> None:
        self._items: deque[tuple[int, T]] = deque(maxlen=capacity)
        self._last = 0
        self._grown = anyio.Event()
        self._closed = False

    @property
    def last_sequence(self) -> int:
        return self._last

    def append(self, item: T) -> int:
        self._last += 1
        self._items.append((self._last, item))
        self._grown.set()
        self._grown = anyio.Event()
        return self._last

    def restore(self, items: list[tuple[int, T]], last: int) -> None:
        """Continue a history kept elsewhere (a store, across a host restart): ``items`` are its
        held (sequence, item) pairs, consecutive and ending at ``last``, or none."""
        assert not items or (
            items[-1][0] == last and items[-1][0] - items[0][0] == len(items) - 1
        ), "restored items must be consecutive and end at last"
        self._items.clear()
        self._items.extend(items)
        self._last = last

    def close(self) -> None:
        """Followers finish once they have read everything."""
        self._closed = True
        self._grown.set()

    def since(self, after: int) -> list[tuple[int, T]]:
        """Held items with a sequence above ``after``."""
        if not self._items or after >= self._last:
            return []
        first = self._items[0][0]
        start = max(0, after + 1 - first)
        return [self._items[i] for i in range(start, len(self._items))]

    def at(self, sequence: int) -> T | None:
        """The item numbered ``sequence`` while it is held, else None."""
        if not self._items or not self._items[0][0] <= sequence <= self._last:
            return None
        return self._items[sequence - self._items[0][0]][1]

    def tail(self, count: int) -> list[tuple[int, T]]:
        return list(self._items)[-count:] if count > 0 else []

    async def follow(
        self, after: int, *, until: Callable[[], bool] | None = None
    ) -> AsyncGenerator[tuple[int, T], None]:
        """Yield held items after ``after``, then new ones as they come.

        Ends when the history is closed, or when ``until()`` turns true at a
        wake-up (callers pass a stop check such as host shutdown).
        """
        cursor = after
        while True:
            grown = self._grown
            held = self.since(cursor)
            for sequence, item in held:
                cursor = sequence
                yield sequence, item
            if held:
                # Items may have been appended (and the stop condition set) while the
                # consumer held a yield: look again before deciding to stop.
                continue
            if self._closed or (until is not None and until()):
                return
            await grown.wait()

    def wake(self) -> None:
        """Wake followers so they re-check their ``until`` condition."""
        self._grown.set()
        self._grown = anyio.Event()
