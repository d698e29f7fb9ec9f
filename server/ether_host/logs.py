"""The one structlog pipeline: console renderer on a TTY, JSON lines otherwise."""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import logging
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from typing import Any

import orjson
import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def configure_logging(log_format: str = "auto", level: str = "info") -> None:
    """Configure structlog once for the process. Logs go to stderr."""
    _LINES.file = sys.stderr
    use_console = log_format == "console" or (log_format == "auto" and sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer()
        if use_console
        else structlog.processors.JSONRenderer(serializer=_orjson_text)
    )
    structlog.configure(
        processors=[
            _add_call_fields,
            _add_trace_ids,
            structlog.processors.add_log_level,
            _utc_timestamp,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=lambda *_: _LINES,
        cache_logger_on_first_use=True,
    )


# The fields of the call being served (``method`` and ``peer``), bound once per call by the
# per-RPC and per-request wrappers (bind_call) and carried by every line logged while it runs.
# One context variable holding them, not structlog's bind_contextvars: that is a variable per
# key, and every line logged in the call (and every deferred one) scanned the whole context
# for them: ~2 µs of each RPC, in-process, for two fields. Work started detached from a call
# (background.py) runs in an empty context, so it never carries them.
_call_fields: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "ether_call_fields", default=None
)


def bind_call(method: str, peer: str) -> None:
    """Credit every line logged from here on in this context (the call's task and what it
    starts, unless detached) to the call ``method`` from ``peer``."""
    _call_fields.set({"method": method, "peer": peer})


def _add_call_fields(
    logger: Any, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    fields = _call_fields.get()
    if fields is not None:
        for key, value in fields.items():
            event.setdefault(key, value)  # a field the line sets itself wins
    return event


# The ids of the span running now ({"trace_id": ..., "span_id": ...}) or None; set when tracing
# is on (join_traces), None when off: then a line pays one check for it.
_span_ids: Callable[[], dict[str, str] | None] | None = None


def join_traces(span_ids: Callable[[], dict[str, str] | None]) -> None:
    """Give every line logged while a recorded span runs its ``trace_id`` and ``span_id``
    (``span_ids`` reads them: telemetry.log_ids), so logs join traces (docs/telemetry.md)."""
    global _span_ids
    _span_ids = span_ids


def joins_traces() -> bool:
    """Whether lines carry the running span's ids (join_traces was called): a line logged a
    moment after its span ended must then be handed to log_later while the span runs."""
    return _span_ids is not None


def _add_trace_ids(
    logger: Any, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    if _span_ids is not None:
        ids = _span_ids()
        if ids is not None:
            event.update(ids)  # the span running now: more precise than a bound one
    return event


class _ToStructlog(logging.Handler):
    """A library's standard-library log records as lines of the one pipeline (JSON when the
    host's log is JSON), not bare text on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        level = record.levelname.lower()
        log = structlog.get_logger(record.name)
        fields: dict[str, Any] = {"logger": record.name}
        if record.exc_info and record.exc_info[1] is not None:
            fields["error"] = repr(record.exc_info[1])
        getattr(log, level if level in _LEVELS else "warning")(record.getMessage(), **fields)


def adopt_library_logs(name: str, level: int = logging.WARNING) -> None:
    """Send the standard-library logger ``name`` (a library's: ``opentelemetry``) through
    structlog, from ``level`` up."""
    library = logging.getLogger(name)
    library.handlers = [_ToStructlog()]
    library.setLevel(level)
    library.propagate = False


class _UtcTimestamp:
    """``timestamp`` as ISO 8601 UTC with microseconds (``2026-11-23T00:50:14.123456Z``), what
    structlog's TimeStamper(fmt="iso", utc=True) writes, for a fraction of its cost: the part to
    the second is formatted once a second. Every RPC logs a line, and the stamp was a quarter
    of the line's cost."""

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")  # one tuple: threads swap it atomically

    def __call__(
        self, logger: Any, method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        now = event.pop(LOGGED_AT, None) or time.time()
        second, prefix = self._second
        if int(now) != second:
            second = int(now)
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, prefix)
        event["timestamp"] = f"{prefix}.{int((now - second) * 1_000_000):06d}Z"
        return event


_utc_timestamp = _UtcTimestamp()
LOGGED_AT = "_logged_at"  # a deferred record's time.time() when it was logged (see log_later)


def _orjson_text(event: dict[str, Any], default: Callable[[Any], Any] | None = None) -> str:
    # One line per RPC goes through here: orjson is ~10x the stdlib's json.dumps.
    return orjson.dumps(event, default=default, option=orjson.OPT_NON_STR_KEYS).decode()


class LineWriter:
    """structlog's output: lines logged during one turn of the event loop are written together
    at the end of it (one write for every RPC line of the turn, not one each); lines from
    outside the loop, and whatever is pending at exit, are written at once."""

    def __init__(self) -> None:
        self.file = sys.stderr
        self._lock = threading.Lock()  # worker threads log too
        self._pending: list[str] = []
        self._scheduled = False

    def msg(self, message: str) -> None:
        # Deferred records were logged before this line: they go first, so the log keeps the
        # order things happened in ("rpc" before "stopped").
        _DEFERRED.render()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._lock:
            self._pending.append(message)
            if loop is None:
                self._write_locked()
                return
            if self._scheduled:
                return
            self._scheduled = True
        loop.call_soon(self.flush)

    log = debug = info = warn = warning = error = err = critical = exception = fatal = msg

    def flush(self) -> None:
        with self._lock:
            self._write_locked()

    def _write_locked(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        text = "\n".join(self._pending) + "\n"
        self._pending.clear()
        try:
            self.file.write(text)
            self.file.flush()
        except (OSError, ValueError):  # stderr closed or gone: nothing left to tell
            pass


class DeferredRecords:
    """Records rendered together a moment after they were logged, each with the context-bound
    fields and the time of its logging: the per-RPC line. Rendered one at a time, between the
    calls they describe, they cost the host ~50 µs of CPU per call at 64 in flight, against ~10
    in a batch: a lone record runs the whole structlog pipeline with cold caches.

    A record keeps the call's fields (bind_call), not the call's Context: a Context
    keeps whatever its variables hold alive (the call's task and all it refers to) until the
    batch is rendered, and holding 50 ms of calls that way cost ~30 µs of host CPU per call at
    64 in flight in an A/B (the garbage collector's older generations filled up)."""

    RENDER_AFTER = 0.05  # seconds; a record is late by at most this much
    MAX_PENDING = 4096  # beyond this many, render at once rather than hold more

    def __init__(self) -> None:
        self._pending: list[_Deferred] = []
        self._lock = threading.Lock()  # worker threads log too
        self._scheduled = False
        self._rendering = False

    def add(self, log: Callable[..., Any], event: str, fields: dict[str, Any]) -> None:
        fields[LOGGED_AT] = time.time()
        call = _call_fields.get()
        if call is not None:  # as _add_call_fields would, now: rendered later, elsewhere
            for key, value in call.items():
                fields.setdefault(key, value)
        if _span_ids is not None:  # rendered later, outside the span: its ids are taken now
            ids = _span_ids()
            if ids is not None:
                for key, value in ids.items():
                    fields.setdefault(key, value)
        with self._lock:
            self._pending.append((log, event, fields))
            count = len(self._pending)
        if self._scheduled:
            if count >= self.MAX_PENDING:
                self.render()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the loop: nothing will come back for it later
            self.render()
            return
        self._scheduled = True
        loop.call_later(self.RENDER_AFTER, self.render)

    def render(self) -> None:
        """Render what is pending (a no-op while rendering: the renderer's own lines)."""
        with self._lock:
            self._scheduled = False
            if self._rendering or not self._pending:
                return
            pending, self._pending = self._pending, []
            self._rendering = True
        try:
            # In an empty context: this one is the context of whichever call scheduled the
            # render, and _add_call_fields would add that call's fields to the others' lines.
            contextvars.Context().run(self._render, pending)
        finally:
            self._rendering = False

    @staticmethod
    def _render(pending: list[_Deferred]) -> None:
        for log, event, fields in pending:
            log(event, **fields)


_Deferred = tuple[Callable[..., Any], str, dict[str, Any]]


_LINES = LineWriter()
_DEFERRED = DeferredRecords()


def log_later(log: Callable[..., Any], event: str, fields: dict[str, Any]) -> None:
    """Log ``event`` with ``fields`` through ``log`` (a bound logger's method) within
    DeferredRecords.RENDER_AFTER: for lines logged on every call, off the call's path."""
    _DEFERRED.add(log, event, fields)


def flush_logs() -> None:
    """Render deferred records and write the lines still pending (at exit, and once the
    event loop has ended)."""
    _DEFERRED.render()
    _LINES.flush()


atexit.register(flush_logs)
