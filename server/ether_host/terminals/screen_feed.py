"""A terminal's screen: its emulator, fed from the output buffer only when someone reads it.

The event loop reads a program's output into the OutputBuffer without parsing it
(terminal.py); the emulator (emulator.py) catches up with the buffer when the screen is asked
for -- ReadScreen, WaitFor's screen condition, Attach's repaint, a cursor-position query, the
exit's record -- in one worker-thread call, one reader at a time. Resizes are kept as marks at
the output offset where they happened, so the emulator applies each at its byte as it catches
up, however late that is.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from ether_host.terminals.buffer import OutputBuffer
from ether_host.terminals.emulator import Emulator, ResizeMark
from ether_host.terminals.model import ExitInfo, ScreenRequest, ScreenView

MAX_MARKS = 256  # resizes kept for an emulator that has not caught up (the oldest go first)


class ScreenFeed:
    """The emulator of one terminal, the lock its readers take turns on, and the resizes it
    has yet to apply."""

    def __init__(self, buffer: OutputBuffer, rows: int, cols: int, scrollback_lines: int) -> None:
        self._buffer = buffer
        self._emulator = Emulator(rows, cols, scrollback_lines)
        self._lock = anyio.Lock()
        self._marks: list[ResizeMark] = []

    def resized(self, rows: int, cols: int) -> None:
        """The PTY took a new size at the output's current end."""
        self._marks.append(ResizeMark(self._buffer.end, rows, cols))
        if len(self._marks) > MAX_MARKS:
            del self._marks[: len(self._marks) - MAX_MARKS]

    async def render(
        self, request: ScreenRequest, exit_info: Callable[[], ExitInfo | None]
    ) -> ScreenView:
        """The screen with every byte of output read so far; ``exit_info`` is read once this
        reader's turn comes (a program that exits meanwhile shows as exited)."""
        async with self._lock:
            return await self._render(request, exit_info())

    async def cursor_report(self, offset: int) -> bytes:
        """The answer to a cursor-position query (CPR) the program wrote at ``offset``: where
        the cursor was there, whatever came after."""
        async with self._lock:
            await self._advance(offset)
            return self._emulator.cursor_report()

    async def _render(self, request: ScreenRequest, exit_info: ExitInfo | None) -> ScreenView:
        """Feed the emulator all output so far and render it, in one worker-thread call (call
        with the lock held): while the loop is busy -- many terminals printing -- every hop to
        a thread and back waits for it and for the GIL."""
        backlog = self._backlog(self._buffer.end)
        emulator = self._emulator

        def advance_and_render() -> ScreenView:
            if backlog is not None:
                emulator.advance(*backlog)
            return emulator.render(request, exit_info)

        view = await anyio.to_thread.run_sync(advance_and_render)
        if backlog is not None:
            self._fed(backlog[2])
        return view

    async def _advance(self, target: int) -> None:
        """Feed the emulator up to ``target`` (call with the lock held)."""
        backlog = self._backlog(target)
        if backlog is not None:
            await anyio.to_thread.run_sync(self._emulator.advance, *backlog)
            self._fed(backlog[2])

    def _backlog(self, target: int) -> tuple[bytes, int, list[ResizeMark]] | None:
        """What the emulator needs to reach ``target``: the output from its offset (taken on the
        loop: the worker thread never touches the buffer) and the resizes made meanwhile."""
        emulator = self._emulator
        start = max(emulator.offset, self._buffer.start)
        data = self._buffer.read(start, target - start) if target > start else b""
        marks = list(self._marks)
        if not data and not marks and start == emulator.offset:
            return None
        return data, start, marks

    def _fed(self, marks: list[ResizeMark]) -> None:
        """Drop the resize marks the emulator has applied (``marks``, those it was given)."""
        done = self._emulator.offset
        self._marks = [m for m in self._marks[: len(marks)] if m.offset > done] + self._marks[
            len(marks) :
        ]
