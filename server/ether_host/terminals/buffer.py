"""A bounded window of a terminal's output, numbered by byte offset, and a wake-up signal.

Every byte the program writes gets the next offset (from 0). The buffer keeps
the newest ``capacity`` bytes in a ring; older ones are overwritten, so a flood
nobody reads costs a bounded amount of memory. The ring starts small and
doubles up to ``capacity`` as output arrives, so a quiet terminal holds little.
The PTY is read straight into the ring (``read_from``): no bytes object per
read, no copy on append, no memmove to drop old output. Readers (the emulator,
attached clients, WaitFor) each keep their own offset into the shared window:
nothing is copied per reader and no writer waits for one.
"""

from __future__ import annotations

import os

import anyio

INITIAL = 16 * 1024  # first ring size (or ``capacity`` if smaller)
READ_ROOM = 16 * 1024  # below capacity, grow when less than this is free for a read


class OutputBuffer:
    """Append-only bytes with offsets; keeps the newest ``capacity`` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._ring = bytearray(min(capacity, INITIAL))
        self._view = memoryview(self._ring)
        self._start = 0  # offset of the oldest byte held
        self._end = 0  # offset the next byte will get

    @property
    def start(self) -> int:
        """Offset of the oldest byte still held."""
        return self._start

    @property
    def end(self) -> int:
        """Offset the next byte will get (total bytes ever written)."""
        return self._end

    @property
    def allocated(self) -> int:
        """Bytes of memory the ring takes now (grows up to ``capacity``)."""
        return len(self._ring)

    def _make_room(self, count: int) -> None:
        """Grow the ring (up to ``capacity``) so ``count`` more bytes fit without overwriting."""
        size = len(self._ring)
        held = self._end - self._start
        if held + count <= size or size >= self.capacity:
            return
        grown = min(self.capacity, max(2 * size, held + count))
        ring = bytearray(grown)
        view = memoryview(ring)
        for offset, piece in self._pieces(self._start, held):
            at = offset % grown
            first = min(len(piece), grown - at)
            view[at : at + first] = piece[:first]
            view[: len(piece) - first] = piece[first:]
        self._ring, self._view = ring, view

    def _pieces(self, offset: int, count: int) -> list[tuple[int, memoryview]]:
        """The held bytes [offset, offset + count) as up to two views (the ring may wrap)."""
        size = len(self._ring)
        at = offset % size
        first = min(count, size - at)
        pieces = [(offset, self._view[at : at + first])]
        if count > first:
            pieces.append((offset + first, self._view[: count - first]))
        return pieces

    def _advance(self, count: int) -> None:
        self._end += count
        self._start = max(self._start, self._end - len(self._ring))

    def append(self, data: bytes) -> None:
        self._make_room(len(data))
        self._write(data)

    def _write(self, data: bytes) -> None:
        size = len(self._ring)
        if len(data) > size:  # only the newest ``size`` bytes can be held
            self._advance(len(data) - size)
            data = data[-size:]
        done = 0
        for _, piece in self._pieces(self._end, len(data)):
            piece[:] = data[done : done + len(piece)]
            done += len(piece)
        self._advance(len(data))

    def read_from(self, fd: int, limit: int) -> int:
        """Read up to ``limit`` bytes from ``fd`` straight into the ring; returns how many
        (0 at end of file). Raises what ``os.readv`` raises (BlockingIOError, EIO).

        One read fills at most the space up to the ring's end (a PTY hands out a few KiB
        per read anyway). Below ``capacity`` the ring grows rather than overwrite; at
        ``capacity`` a read overwrites the oldest bytes."""
        size = len(self._ring)
        end = self._end
        if size < self.capacity:
            free = size - (end - self._start)
            if free < READ_ROOM:
                self._make_room(READ_ROOM)
                size = len(self._ring)
                free = size - (end - self._start)
            limit = min(limit, free)
        at = end % size
        count = os.readv(fd, (self._view[at : at + min(limit, size - at)],))
        end += count
        self._end = end
        if end - self._start > size:
            self._start = end - size
        return count

    def find(self, byte: bytes, offset: int) -> bool:
        """True when ``byte`` occurs in the held output from ``offset`` on."""
        offset = max(offset, self._start)
        size = len(self._ring)
        at = offset % size
        count = self._end - offset
        first = min(count, size - at)
        if self._ring.find(byte, at, at + first) >= 0:
            return True
        return count > first and self._ring.find(byte, 0, count - first) >= 0

    def read(self, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes from ``offset`` (clamped into the held window)."""
        offset = max(offset, self._start)
        count = min(limit, self._end - offset)
        if count <= 0:
            return b""
        pieces = self._pieces(offset, count)
        if len(pieces) == 1:
            return bytes(pieces[0][1])
        return b"".join(piece for _, piece in pieces)

    def held(self, offset: int) -> bool:
        """True when output from ``offset`` on is still held."""
        return self._start <= offset <= self._end


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
