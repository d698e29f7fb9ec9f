"""The frame channel: fd hygiene, one reader thread, one writer thread, frame encoding.

Rule 11 of docs/protocol.md: the frame stream leaves fd 1 before user code loads. Frames go to
a private (close-on-exec) duplicate of fd 1, fd 1 becomes a copy of stderr, and fd 0 becomes
/dev/null, so ``print``, C-level writes and child processes cannot touch the link.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

READ_CHUNK = 1 << 20
_ID_RE = re.compile(rb'"id"\s*:\s*"((?:[^"\\]|\\.){1,256})"')
_TYPE_RE = re.compile(rb'"type"\s*:\s*"([a-z_]{1,32})"')


def diag(message: str) -> None:
    """One line to stderr, the agent's free-form log (never through sys.stderr: user code may
    have replaced it)."""
    with contextlib.suppress(OSError):
        os.write(2, f"ether_agent: {message}\n".encode(errors="backslashreplace"))


@dataclasses.dataclass(frozen=True)
class Channel:
    """The private fds of the link: frames are read from ``in_fd`` and written to ``out_fd``."""

    in_fd: int
    out_fd: int


def take_stdio() -> Channel:
    """Move the link off fds 0 and 1 (idempotent per process: call it once, early)."""
    for stream in (sys.stdout, sys.__stdout__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    in_fd = os.dup(0)  # PEP 446: dup'ed fds are non-inheritable, i.e. close-on-exec
    out_fd = os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = open(  # noqa: SIM115 - lives as long as the process
        1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False
    )
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - /dev/null
    return Channel(in_fd, out_fd)


# --- encoding ----------------------------------------------------------------------------------


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset):
        return list(value)
    dump = getattr(value, "model_dump", None) or getattr(value, "to_dict", None)
    if callable(dump):
        return dump()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode(frame: dict[str, Any]) -> bytes:
    """One compact JSON line, ``\\n``-terminated. Raises TypeError/ValueError for values that
    are not JSON (NaN, unknown objects)."""
    try:
        text = json.dumps(
            frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default
        )
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # lone surrogates: keep them as JSON escapes
        text = json.dumps(
            frame, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=_default
        )
        return text.encode("ascii") + b"\n"


# --- writer ------------------------------------------------------------------------------------


class FrameWriter:
    """The single owner of the frame fd: a queue drained by one thread, one write loop per
    frame, so frames never interleave whatever thread sends them."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.broken = False
        self._thread = threading.Thread(target=self._run, name="ether-writer", daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> None:
        self._queue.put(data)

    def close(self, timeout: float) -> bool:
        """Write what is queued, then stop; False if the host did not take it in time."""
        self._queue.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            if data is None:
                return
            if self.broken:
                continue
            view = memoryview(data)
            try:
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
            except OSError as exc:  # EPIPE: the host closed our stdout
                self.broken = True
                diag(f"frame stream closed ({exc.strerror}); dropping frames")


# --- reader ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Oversize:
    """A line longer than the max frame: discarded; its id and type, if readable from its start."""

    size: int
    id: str | None
    type: str | None


class FrameReader:
    """Reads lines from ``fd`` in a thread: no line cap but ``max_frame`` (checked on whole
    lines), invalid UTF-8 and non-JSON lines logged and skipped, never fatal.

    ``on_frame(dict)``, ``on_oversize(Oversize)`` and ``on_eof()`` are called in the thread.
    """

    def __init__(
        self,
        fd: int,
        max_frame: Callable[[], int],
        on_frame: Callable[[dict[str, Any]], None],
        on_oversize: Callable[[Oversize], None],
        on_eof: Callable[[], None],
    ) -> None:
        self._fd = fd
        self._max_frame = max_frame
        self._on_frame = on_frame
        self._on_oversize = on_oversize
        self._on_eof = on_eof
        self.skipped = 0
        self._thread = threading.Thread(target=self._run, name="ether-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._read_all()
        except Exception as exc:  # the reader must not die silently
            diag(f"frame reader failed: {exc!r}")
        finally:
            self._on_eof()

    def _read_all(self) -> None:
        buf = bytearray()
        discarding: Oversize | None = None
        dropped = 0
        while True:
            try:
                chunk = os.read(self._fd, READ_CHUNK)
            except InterruptedError:
                continue
            except OSError as exc:
                diag(f"reading frames failed: {exc.strerror}")
                chunk = b""
            if not chunk:
                if discarding is not None:
                    self._on_oversize(discarding)
                elif buf:
                    self._line(bytes(buf))
                return
            start = 0
            limit = self._max_frame()
            while start < len(chunk):
                nl = chunk.find(b"\n", start)
                end = len(chunk) if nl < 0 else nl
                if discarding is not None:
                    dropped += end - start
                else:
                    buf += chunk[start:end]
                    if len(buf) > limit:
                        head = bytes(buf[:4096])
                        discarding = Oversize(0, _search(_ID_RE, head), _search(_TYPE_RE, head))
                        dropped = len(buf)
                        buf.clear()
                if nl < 0:
                    break
                if discarding is not None:
                    self._on_oversize(dataclasses.replace(discarding, size=dropped))
                    discarding = None
                else:
                    self._line(bytes(buf))
                    buf.clear()
                start = nl + 1

    def _line(self, raw: bytes) -> None:
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            return
        try:
            frame = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            self._skip(raw, "is not valid UTF-8")
            return
        except ValueError:
            self._skip(raw, "is not JSON")
            return
        if not isinstance(frame, dict):
            self._skip(raw, "is not a JSON object")
            return
        self._on_frame(frame)

    def _skip(self, raw: bytes, why: str) -> None:
        self.skipped += 1
        if self.skipped <= 20 or self.skipped % 1000 == 0:
            sample = raw[:80].decode("utf-8", "backslashreplace")
            diag(f"skipped a line of {len(raw)} bytes that {why} (#{self.skipped}): {sample!r}")


def _search(pattern: re.Pattern[bytes], head: bytes) -> str | None:
    m = pattern.search(head)
    if m is None:
        return None
    try:
        value = json.loads(b'"' + m.group(1) + b'"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None
