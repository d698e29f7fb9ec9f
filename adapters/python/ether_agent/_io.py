"""The frame channel: fd hygiene, a reader and a writer on the event loop, frame encoding.

Rule 11 of docs/protocol.md: the frame stream leaves fd 1 before user code loads. Frames go to
a private (close-on-exec) duplicate of fd 1, fd 1 becomes a copy of stderr, and fd 0 becomes
/dev/null, so ``print``, C-level writes and child processes cannot touch the link.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import json
import os
import re
import select
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

# orjson when the interpreter has it (the host's own does, and agents run on it): frames encode
# and decode several times faster, about a quarter of an echo agent's CPU per task. Without it
# the json module does the same job. Whatever orjson would read or write differently (NaN, big
# integers, dataclasses, datetimes, sets, non-str keys) still goes through the json module, so
# a frame's value and errors never depend on whether orjson is there.
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - the SDK itself needs only the standard library
    _orjson = None  # type: ignore[assignment]
else:
    _ORJSON_OPTIONS = (
        _orjson.OPT_APPEND_NEWLINE
        | _orjson.OPT_PASSTHROUGH_DATACLASS
        | _orjson.OPT_PASSTHROUGH_DATETIME
    )

# orjson reads an integer beyond 64 bits as a float; the json module keeps it exact. A frame with
# a run of 20 digits goes to the json module. Found by mapping digits to "0" and the rest to " ":
# a regex for the run takes longer than the json module's whole parse on number-heavy frames.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_NUMBER = b"0" * 20

# One read's most bytes. Reads land in a buffer kept for the life of the reader: a fresh
# os.read(fd, READ_CHUNK) would malloc (mmap) a block this size per read, shrink it (mremap)
# and free it (munmap) -- three syscalls and page faults per frame, which on a VM cost more
# than the frame itself. The buffer starts at FIRST_READ_CHUNK and grows to READ_CHUNK the
# first time a read fills it: an idle agent reads a few short frames, and a READ_CHUNK buffer
# from the start (zeroed, so every page touched) was 0.25 MiB of its private memory.
READ_CHUNK = 256 * 1024
FIRST_READ_CHUNK = 4 * 1024
_ID_RE = re.compile(rb'"id"\s*:\s*"((?:[^"\\]|\\.){1,256})"')
_TYPE_RE = re.compile(rb'"type"\s*:\s*"([a-z_]{1,32})"')


def diag(message: str) -> None:
    """One line to stderr, the agent's free-form log (never through sys.stderr: user code may
    have replaced it)."""
    with contextlib.suppress(OSError):
        os.write(2, f"ether_agent: {message}\n".encode(errors="backslashreplace"))


class Channel:
    """The private fds of the link: frames are read from ``in_fd`` and written to ``out_fd``."""

    __slots__ = ("in_fd", "out_fd")

    def __init__(self, in_fd: int, out_fd: int) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd


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
    uuid = sys.modules.get("uuid")  # not imported for this: a UUID exists only once it is
    if uuid is not None and isinstance(value, uuid.UUID):  # as orjson writes them
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    dump = getattr(value, "model_dump", None) or getattr(value, "to_dict", None)
    if callable(dump):
        return dump()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode(frame: dict[str, Any]) -> bytes:
    """One compact JSON line, ``\\n``-terminated. Raises TypeError/ValueError for values that
    are not JSON (NaN, unknown objects)."""
    if _orjson is not None:
        try:
            data: bytes = _orjson.dumps(frame, option=_ORJSON_OPTIONS)
        except TypeError:
            pass  # a type only the json module and _default take, a big int, a lone surrogate
        else:
            # orjson writes NaN and Infinity as null where the json module refuses them: a
            # frame with a null in it is encoded again by the json module, which decides.
            if b"null" not in data:
                return data
    return _encode_stdlib(frame)


def decode(raw: bytes) -> Any:
    """A frame's JSON value. Raises UnicodeDecodeError or ValueError as ``json.loads`` does."""
    if _orjson is not None and _LONG_NUMBER not in raw.translate(_DIGITS_ONLY):
        try:
            return _orjson.loads(raw)
        except ValueError:
            pass  # orjson is stricter (NaN, lone surrogate escapes): json decides
    return json.loads(raw.decode("utf-8"))


def _encode_stdlib(frame: dict[str, Any]) -> bytes:
    try:
        return (_ENCODER.encode(frame) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: keep them as JSON escapes
        return (_ASCII_ENCODER.encode(frame) + "\n").encode("ascii")


# Made once: json.dumps with any non-default option builds a new encoder on every call.
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default
)
_ASCII_ENCODER = json.JSONEncoder(
    ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=_default
)


# --- writer ------------------------------------------------------------------------------------


class FrameWriter:
    """The single owner of the frame fd. Frames are queued from any thread; the event loop
    writes them with non-blocking write(2)s, so frames never interleave: the first frame of a
    loop turn at once, the rest of the turn's frames together at its end, so a burst of
    results costs the host one wakeup, not one each. Before ``attach`` and after the loop
    ends (``close``), frames are written in blocking mode."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()  # guards _queued and _scheduled: handler threads send too
        self._queued: list[bytes] = []
        self._scheduled = False
        self._unsent = bytearray()  # taken from _queued, not yet accepted by the pipe
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._waiting_writable = False
        self.broken = False

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Write from ``loop`` from now on (call it from the loop's thread)."""
        self._loop = loop
        self._loop_thread = threading.get_ident()
        os.set_blocking(self._fd, False)

    def write(self, data: bytes) -> None:
        with self._lock:
            self._queued.append(data)
            if self._scheduled or self._loop is None:
                return
            self._scheduled = True
        try:
            if threading.get_ident() == self._loop_thread:
                # The first frame of a loop turn goes out now (no extra turn of latency);
                # frames sent later in the same turn wait for the end of it, together.
                self._write_first()
                with self._lock:
                    self._scheduled = True
                self._loop.call_soon(self._flush)
            else:
                self._loop.call_soon_threadsafe(self._flush)
        except RuntimeError:  # the loop is closed: close() writes what is queued
            pass

    def _take(self) -> None:
        with self._lock:
            self._scheduled = False
            queued, self._queued = self._queued, []
        for data in queued:
            self._unsent += data

    def _flush(self) -> None:
        self._take()
        self._write_some()

    def _write_first(self) -> None:
        """``_flush`` of the first frame of a loop turn, the one a sequential caller waits
        for: written straight from the queue when nothing is left over from before (one
        write(2), without the copy through ``_unsent``)."""
        if self._unsent or self.broken:
            self._flush()
            return
        with self._lock:
            self._scheduled = False
            queued, self._queued = self._queued, []
        data = queued[0] if len(queued) == 1 else b"".join(queued)
        try:
            n = os.write(self._fd, data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as exc:  # EPIPE: the host closed our stdout
            self._broke(exc)
            return
        if n < len(data):  # the pipe is full: the rest when it is writable again
            self._unsent += memoryview(data)[n:]
            self._write_some()

    def _write_some(self) -> None:
        if self.broken:
            self._unsent.clear()
        while self._unsent:
            try:
                n = os.write(self._fd, self._unsent)
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            except OSError as exc:  # EPIPE: the host closed our stdout
                self._broke(exc)
                break
            del self._unsent[:n]
        loop = self._loop
        if loop is None:
            return
        if self._unsent and not self._waiting_writable:
            loop.add_writer(self._fd, self._write_some)
            self._waiting_writable = True
        elif not self._unsent and self._waiting_writable:
            loop.remove_writer(self._fd)
            self._waiting_writable = False

    def _broke(self, exc: OSError) -> None:
        self.broken = True
        self._unsent.clear()
        diag(f"frame stream closed ({exc.strerror}); dropping frames")

    def close(self, timeout: float) -> bool:
        """Write what is queued (the loop has stopped); False if the host did not take it in
        ``timeout`` seconds."""
        if self._loop is not None and self._waiting_writable:
            with contextlib.suppress(Exception):
                self._loop.remove_writer(self._fd)
            self._waiting_writable = False
        self._loop = None
        self._take()
        deadline = time.monotonic() + timeout
        while self._unsent and not self.broken:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            select.select([], [self._fd], [], left)
            self._write_some()
        with contextlib.suppress(OSError):
            os.set_blocking(self._fd, True)  # for fatal() and anything after
        return True


# --- reader ------------------------------------------------------------------------------------


class Oversize:
    """A line longer than the max frame: discarded; its id and type, if readable from its start."""

    __slots__ = ("id", "size", "type")

    def __init__(self, size: int, id: str | None, type: str | None) -> None:
        self.size = size
        self.id = id
        self.type = type


class FrameReader:
    """Reads lines from ``fd`` on the event loop (non-blocking reads when it is readable): no
    line cap but ``max_frame`` (checked on whole lines), invalid UTF-8 and non-JSON lines
    logged and skipped, never fatal.

    ``on_frame(dict)``, ``on_oversize(Oversize)`` and ``on_eof()`` are called on the loop.
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
        self._buf = bytearray()
        self._chunk = bytearray(FIRST_READ_CHUNK)
        self._discarding: Oversize | None = None
        self._dropped = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        os.set_blocking(self._fd, False)
        loop.add_reader(self._fd, self._readable)

    def _readable(self) -> None:
        try:
            while True:
                try:
                    count = os.readv(self._fd, (self._chunk,))
                except BlockingIOError:
                    return
                except InterruptedError:
                    continue
                except OSError as exc:
                    diag(f"reading frames failed: {exc.strerror}")
                    count = 0
                if not count:
                    self._end()
                    return
                self._feed(bytes(memoryview(self._chunk)[:count]))
                if count < len(self._chunk):
                    return  # drained: the next data wakes us again
                if len(self._chunk) < READ_CHUNK:
                    self._chunk = bytearray(READ_CHUNK)  # a busy link: bigger reads from now on
        except Exception as exc:  # the reader must not die silently
            diag(f"frame reader failed: {exc!r}")
            self._end()

    def _end(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
            self._loop = None
        if self._discarding is not None:
            self._on_oversize(Oversize(self._dropped, self._discarding.id, self._discarding.type))
            self._discarding = None
        elif self._buf:
            self._line(bytes(self._buf))
            self._buf.clear()
        self._on_eof()

    def _feed(self, chunk: bytes) -> None:
        buf = self._buf
        start = 0
        limit = self._max_frame()
        while start < len(chunk):
            nl = chunk.find(b"\n", start)
            end = len(chunk) if nl < 0 else nl
            if self._discarding is not None:
                self._dropped += end - start
            elif not buf and nl >= 0 and end - start <= limit:
                self._line(chunk[start:end])  # the common case: a whole line in the chunk
                start = nl + 1
                continue
            else:
                buf += chunk[start:end]
                if len(buf) > limit:
                    head = bytes(buf[:4096])
                    self._discarding = Oversize(0, _search(_ID_RE, head), _search(_TYPE_RE, head))
                    self._dropped = len(buf)
                    buf.clear()
            if nl < 0:
                break
            if self._discarding is not None:
                self._on_oversize(
                    Oversize(self._dropped, self._discarding.id, self._discarding.type)
                )
                self._discarding = None
            else:
                self._line(bytes(buf))
                buf.clear()
            start = nl + 1

    def _line(self, raw: bytes) -> None:
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            return
        try:
            frame = decode(raw)
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
