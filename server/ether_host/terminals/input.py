"""A terminal's input queue: bytes written to the input pump's pipe as fast as it takes them,
so a 10 MB paste returns at once and never blocks the event loop; and the interrupt rule that
lets a Ctrl-C jump the queue."""

from __future__ import annotations

import asyncio
import os
import termios
from collections import deque

WRITE_PIECE = 64 * 1024


class InputQueue:
    """Pieces of input waiting for the pipe, written from the event loop when it has room."""

    def __init__(self) -> None:
        self.pending = 0  # bytes queued and not yet in the pipe
        self._pieces: deque[memoryview] = deque()
        self._fd = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writing = False  # registered with the loop for the pipe's room

    def open(self, fd: int) -> None:
        """Write to ``fd`` (a non-blocking pipe) from now on."""
        self._fd = fd
        self._loop = asyncio.get_running_loop()

    def close(self) -> None:
        """Drop what is queued and never write again (the pipe is about to be closed)."""
        self.drop()
        self._fd = -1

    def put(self, data: bytes) -> None:
        view = memoryview(data)
        for start in range(0, len(view), WRITE_PIECE):
            self._pieces.append(view[start : start + WRITE_PIECE])
        self.pending += len(data)
        self._flush()

    def drop(self) -> int:
        """Forget what is queued; returns how many bytes that was."""
        dropped = self.pending
        self._pieces.clear()
        self.pending = 0
        self._stop_writing()
        return dropped

    def _flush(self) -> None:
        while self._pieces:
            piece = self._pieces[0]
            try:
                written = os.write(self._fd, piece)
            except BlockingIOError:
                break
            except OSError:  # the pump is gone (so is the PTY), or the terminal is closing
                self.drop()
                return
            self.pending -= written
            if written < len(piece):
                self._pieces[0] = piece[written:]
                break
            self._pieces.popleft()
        if self._pieces and not self._writing and self._loop is not None:
            self._loop.add_writer(self._fd, self._flush)
            self._writing = True
        elif not self._pieces:
            self._stop_writing()

    def _stop_writing(self) -> None:
        if self._writing and self._loop is not None and self._fd >= 0:
            self._loop.remove_writer(self._fd)
        self._writing = False


def interrupt_at(master: int, data: bytes) -> int:
    """Where the last character in ``data`` that makes the terminal signal its program is
    (INTR, QUIT or SUSP: Ctrl-C, Ctrl-\\, Ctrl-Z, or what `stty` set), or -1: there is none,
    or the program turned ISIG off (raw mode, as vim does) or set NOFLSH.

    The kernel drops a terminal's unread input when it sends such a signal, so input queued
    in front of one may be dropped too, and the interrupt act at once."""
    try:
        # On Linux a PTY master reports its slave's settings, which the program sets.
        lflag, chars = (attrs := termios.tcgetattr(master))[3], attrs[6]
    except termios.error:
        return -1
    if not lflag & termios.ISIG or lflag & termios.NOFLSH:
        return -1
    found = -1
    for index in (termios.VINTR, termios.VQUIT, termios.VSUSP):
        char = chars[index]
        if isinstance(char, bytes) and char != b"\x00":  # NUL: the character is disabled
            found = max(found, data.rfind(char))
    return found
