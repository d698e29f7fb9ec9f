"""A terminal's output recorded as an asciicast v2 file (https://docs.asciinema.org/manual/asciicast/v2/).

The cast is written as the output arrives, from the same place that fills the terminal's
output buffer (Terminal._on_readable), so it sees every byte the program wrote, including the
ones a slow attached client skipped. It goes to a file under the host's state directory, one
``os.write`` per piece of output, so a long recording costs disk, not memory, and a download
reads the file (in a worker thread) while recording goes on.

Lines: a JSON header ``{"version": 2, "width", "height", "timestamp", "env"}``, then
``[seconds, "o", text]`` for output and ``[seconds, "r", "COLSxROWS"]`` for a resize; seconds
count from the header's moment on the monotonic clock, so they never go backwards. The bytes are
decoded as UTF-8 incrementally (a character split across two reads is written whole) with
invalid bytes replaced, as asciicast's text must be valid UTF-8.

The file is bounded by ``limit`` bytes: the output event that would pass it is cut to the
characters that fit (a resize that would pass it is left out) and the recording stops
("size_limit"), leaving a valid cast of everything up to there. Cut, not dropped: one read of
a flood can be larger than the whole limit (up to the terminal's read size, 256 KiB), and the
cast would then hold none of it.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import structlog

log = structlog.get_logger("ether.terminals")

STOPPED = "stopped"  # SetRecording(record=false)
SIZE_LIMIT = "size_limit"
EXITED = "exited"
WRITE_FAILED = "write_failed"  # the disk refused a write (full, gone)


@dataclass(frozen=True)
class RecordingInfo:
    """The state of a terminal's recording."""

    active: bool
    size: int
    limit: int
    started_at: float
    stopped_reason: str


class Recorder:
    """One asciicast file being written (or written and stopped)."""

    def __init__(
        self,
        path: Path,
        limit: int,
        *,
        rows: int,
        cols: int,
        term: str,
        title: str = "",
        terminal_id: str = "",
    ) -> None:
        self.path = path
        self.limit = limit
        self.started_at = time.time()
        self._clock = time.monotonic()
        self._terminal_id = terminal_id
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._size = 0
        self._stopped = ""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        header: dict[str, object] = {
            "version": 2,
            "width": cols,
            "height": rows,
            "timestamp": int(self.started_at),
            "env": {"TERM": term},
        }
        if title:
            header["title"] = title
        self._write(orjson.dumps(header) + b"\n")

    @property
    def active(self) -> bool:
        return not self._stopped

    def info(self) -> RecordingInfo:
        return RecordingInfo(self.active, self._size, self.limit, self.started_at, self._stopped)

    def output(self, data: bytes) -> None:
        """Record a piece of the program's output."""
        if self._stopped:
            return
        text = self._decoder.decode(data)
        if text:
            self._event("o", text)

    def resize(self, rows: int, cols: int) -> None:
        if not self._stopped:
            self._event("r", f"{cols}x{rows}")

    def stop(self, reason: str = STOPPED) -> None:
        """Stop recording; the file stays readable until ``remove``."""
        if self._stopped:
            return
        self._stopped = reason
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1

    def remove(self) -> None:
        """Stop and delete the file (the terminal is gone)."""
        self.stop()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def read(self, offset: int, count: int) -> bytes:
        """Up to ``count`` bytes of the cast from ``offset`` (blocking: call in a worker thread)."""
        count = min(count, self._size - offset)
        if count <= 0:  # at or past the end (no seek there: far past it, seek fails)
            return b""
        try:
            with open(self.path, "rb") as cast:
                cast.seek(offset)
                return cast.read(count)
        except FileNotFoundError:  # removed meanwhile: the terminal was closed
            return b""

    def _event(self, kind: str, text: str) -> None:
        seconds = round(time.monotonic() - self._clock, 6)
        line = orjson.dumps([seconds, kind, text]) + b"\n"
        if self._size + len(line) > self.limit:
            if kind == "o":
                self._write(self._fitting(seconds, text))
            log.warning(
                "terminal recording reached its size limit; stopped",
                terminal=self._terminal_id,
                limit=self.limit,
            )
            self.stop(SIZE_LIMIT)
            return
        self._write(line)

    def _fitting(self, seconds: float, text: str) -> bytes:
        """The longest ``[seconds, "o", text[:n]]`` line that fits in what is left under the
        limit (empty when not one character does), found by halving: once per recording, at
        its end."""
        room = self.limit - self._size
        best, low, high = b"", 1, len(text)
        while low <= high:
            middle = (low + high) // 2
            line = orjson.dumps([seconds, "o", text[:middle]]) + b"\n"
            if len(line) <= room:
                best, low = line, middle + 1
            else:
                high = middle - 1
        return best

    def _write(self, line: bytes) -> None:
        """Append ``line`` (the caller has checked the limit). A write that fails stops the
        recording, the part of the line written cut off again: the cast stays a valid file,
        every line whole."""
        whole = self._size
        try:
            view = memoryview(line)
            while view:  # a regular file takes it whole unless the disk is full
                written = os.write(self._fd, view)
                view = view[written:]
                self._size += written
        except OSError as error:
            log.warning(
                "could not write a terminal recording; stopped",
                terminal=self._terminal_id,
                error=str(error),
            )
            with contextlib.suppress(OSError):  # shrinking needs no room on the disk
                os.ftruncate(self._fd, whole)
                self._size = whole
            self.stop(WRITE_FAILED)
