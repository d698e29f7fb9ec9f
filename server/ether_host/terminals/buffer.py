"""A bounded window of a terminal's output, numbered by byte offset, and a wake-up signal.

Every byte the program writes gets the next offset (from 0). The buffer keeps
the newest ``capacity`` bytes; older ones are dropped, so a flood nobody reads
costs a bounded amount of memory. Readers (the emulator, attached clients,
WaitFor) each keep their own offset into the shared window: nothing is copied
per reader and no writer waits for one.
"""

from __future__ import annotations

import anyio


class OutputBuffer:
    """Append-only bytes with offsets; keeps the newest ``capacity`` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data = bytearray()
        self._start = 0  # offset of self._data[0]

    @property
    def start(self) -> int:
        """Offset of the oldest byte still held."""
        return self._start

    @property
    def end(self) -> int:
        """Offset the next byte will get (total bytes ever written)."""
        return self._start + len(self._data)

    def append(self, data: bytes) -> None:
        self._data += data
        # Trim in steps of a quarter of the capacity: one memmove per step,
        # not one per read, keeps appends cheap during a flood.
        if len(self._data) > self.capacity + self.capacity // 4:
            drop = len(self._data) - self.capacity
            del self._data[:drop]
            self._start += drop

    def read(self, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes from ``offset`` (clamped into the held window)."""
        begin = max(offset, self._start) - self._start
        return bytes(self._data[begin : begin + limit])

    def held(self, offset: int) -> bool:
        """True when output from ``offset`` on is still held."""
        return self._start <= offset <= self.end


class Notifier:
    """Wakes every waiter on each ``notify``; waiters re-check their own condition."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    async def wait(self) -> None:
        await self._event.wait()

    def waiter(self) -> anyio.Event:
        """The event the next notify sets: take it *before* checking a condition."""
        return self._event
