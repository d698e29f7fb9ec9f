"""Ended spans on their way to the relay child: the event loop appends each as one tuple
(spans.Row) to a queue; a thread of the host's writes them to the relay in batches, every
``delay`` seconds or as soon as a batch is full, and at the host's stop writes what is left.

What the SDK's BatchSpanProcessor did, for the host's own rows: the same queue bound (a span
that finds it full is dropped, and the log says so once), the same batch size, and on the
loop only a ``deque.append`` per span. The thread serialises a batch with orjson (C, a few
tens of µs per batch, under the interpreter lock) and writes it to the relay's pipe (outside
the lock).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import structlog

from ether_host.telemetry.relay import RelayExporter
from ether_host.telemetry.spans import Row

log = structlog.get_logger(__name__)

BATCH = 512  # spans per write (the SDK's max_export_batch_size)
MAX_QUEUED = 2048  # spans waiting at most (the SDK's max_queue_size)
STOP_BUDGET = 10.0  # the thread's last writes at stop (each bounded by the relay's budget)


class SpanBatches:
    """The queue of ended spans and the thread that writes them to ``relay``."""

    def __init__(
        self, relay: RelayExporter, resource: list[Any], scope: list[Any], *, delay: float
    ) -> None:
        self._relay = relay
        self._resource = resource  # sent with the first batch only: the relay keeps it
        self._scope = scope
        self._delay = delay
        self._rows: deque[Row] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="trace-batches", daemon=True)
        self._thread.start()

    def add(self, row: Row) -> None:
        """One ended span (on the event loop: an append, and a wake-up per full batch)."""
        rows = self._rows
        if len(rows) >= MAX_QUEUED:
            if not self.dropped:
                log.warning("the trace relay is behind the host: spans dropped")
            self.dropped += 1
            return
        rows.append(row)
        if len(rows) == BATCH:
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._delay)
            self._wake.clear()
            stopping = self._stopping
            try:
                self._write_all()
            except Exception:  # a bug here must not end the thread: spans would pile up
                log.exception("trace batch not relayed")
            if stopping:
                return

    def _write_all(self) -> None:
        rows = self._rows
        while rows:
            batch = [rows.popleft() for _ in range(min(len(rows), BATCH))]
            head: dict[str, Any] = {"scope": self._scope, "spans": batch}
            if self._resource:
                head["resource"], self._resource = self._resource, []
            self._relay.write_batch(head, len(batch))

    def shutdown(self) -> None:
        """Write what is queued, then stop the relay (it exports and exits)."""
        self._stopping = True
        self._wake.set()
        self._thread.join(STOP_BUDGET)
        self._relay.shutdown()
        if self.dropped:
            log.warning("spans dropped: the trace relay was behind the host", spans=self.dropped)
