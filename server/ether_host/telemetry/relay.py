"""The host's span exporter: hands each batch of ended spans to a relay child process
(``relay_child.py``), which encodes them as OTLP and exports them to the collector.

Why a child: measured at 64 Execute calls in flight (bench/telemetry.py, issue 25), the SDK's
OTLP encoding is pure Python, ~50 µs per span pair, and ran in the BatchSpanProcessor's thread
of the host, holding the GIL against the event loop: every function of the main thread got
slower (+97 µs per call against ~180 µs untraced, -38 % calls/s). Here the host's batch
thread (batches.py) writes each batch of span rows (spans.py) as one orjson line to the
child's stdin; the encoding, the gRPC export and its retries run in another process.

The child ends with the host: at the host's stop ``shutdown`` closes its
stdin and waits for it (it exports what it holds and exits; killed past ``STOP_BUDGET``); after
a ``kill -9`` of the host it reads EOF and does the same. A dead or stuck child never blocks the
host nor crashes it: a batch that cannot be written within ``WRITE_BUDGET`` is dropped, the
relay given up (the child killed), and the log says so once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import subprocess
import sys
import threading
import time
from typing import Any

import orjson
import structlog

log = structlog.get_logger(__name__)

# A batch the child does not take within this long (its stdin pipe full) is dropped, and the
# relay given up: the child reads its stdin into a queue of its own, so a full pipe means it
# is stuck, not busy.
WRITE_BUDGET = 2.0
# At the host's stop: the child's own final export is bounded (relay_child.FINAL_BUDGET), so
# a child still running past this is stuck and killed.
STOP_BUDGET = 5.0
PIPE_SIZE = 1 << 20  # Linux's default most for a pipe (fs.pipe-max-size)
_LEVELS = {"debug", "info", "warning", "error", "critical"}


class RelayExporter:
    """Writes batches to a relay child exporting OTLP/gRPC to ``endpoint``."""

    def __init__(self, endpoint: str, *, insecure: bool) -> None:
        self._child = subprocess.Popen(
            [sys.executable, "-m", "ether_host.telemetry.relay_child", endpoint]
            + (["--insecure"] if insecure else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # Its own session: a Ctrl-C at the terminal stops the host, whose stop then closes
            # the child's stdin, so the spans of the last calls still go out.
            start_new_session=True,
        )
        assert self._child.stdin is not None and self._child.stderr is not None
        self._stdin = self._child.stdin.fileno()
        os.set_blocking(self._stdin, False)  # a write waits WRITE_BUDGET at most (select)
        # A whole batch (512 spans, some 150 kB) in one write, not in 64 kB pieces each waiting
        # for the child to read; where the kernel refuses, the default size works as well.
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(self._stdin, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self._lost = False  # the relay was given up: spans are dropped from then on
        self._lock = threading.Lock()  # a write (the batch thread) against shutdown (the stop's)
        threading.Thread(
            target=self._relog, args=(self._child.stderr,), name="trace-relay-log", daemon=True
        ).start()
        log.info("trace relay started", pid=self._child.pid, endpoint=endpoint)

    @property
    def pid(self) -> int:
        return self._child.pid

    def write_batch(self, batch: dict[str, Any], count: int) -> bool:
        """Write one batch (batches.py: ``spans``, ``scopes``, the first time ``resource``)
        as one line; False when it was dropped (the relay given up, a value JSON cannot hold)."""
        with self._lock:
            if self._lost:
                return False
            try:
                line = orjson.dumps(batch) + b"\n"
            except TypeError as error:  # an attribute JSON cannot hold (an int past 64 bits)
                log.warning("trace batch not relayed", spans=count, error=str(error))
                return False
            return self._write(line, count)

    def _write(self, line: bytes, count: int) -> bool:
        view = memoryview(line)
        deadline = time.monotonic() + WRITE_BUDGET
        while view:
            try:
                view = view[os.write(self._stdin, view) :]
            except BlockingIOError:
                pass
            except OSError as error:  # EPIPE: the child is gone
                self._give_up("the trace relay exited; spans are dropped", count, error)
                return False
            if view:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._give_up("the trace relay is stuck; spans are dropped", count, None)
                    return False
                select.select([], [self._stdin], [], left)
        return True

    def _give_up(self, message: str, count: int, error: OSError | None) -> None:
        """Once: drop this batch and every later one, kill the child, and say so."""
        self._lost = True
        self._child.kill()
        log.error(
            message,
            pid=self._child.pid,
            spans=count,
            returncode=self._child.poll(),
            error=None if error is None else str(error),
        )

    def shutdown(self) -> None:
        """Close the child's stdin (it exports what it holds and exits) and wait for it."""
        with self._lock:
            self._lost = True
            try:
                assert self._child.stdin is not None
                self._child.stdin.close()
            except OSError:
                pass  # already gone: nothing left to tell it
        try:
            self._child.wait(STOP_BUDGET)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
            log.error("trace relay killed at stop", pid=self._child.pid, waited=STOP_BUDGET)

    @staticmethod
    def _relog(stderr: Any) -> None:
        """The child's log lines (JSON: logger, level, event) as lines of the host's log, so an
        export that fails says so there; anything else it writes (a traceback) as text."""
        for raw in stderr:
            try:
                record = orjson.loads(raw)
                name, level, event = record["logger"], record["level"], record["event"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                text = raw.decode("utf-8", errors="replace").rstrip()
                if text:
                    log.warning("trace relay", line=text)
                continue
            said = structlog.get_logger(name)
            getattr(said, level if level in _LEVELS else "warning")(event, logger=name)
