"""The run store: runs, their tasks and events in SQLite under the state directory.

``RunStore`` is made of its parts: its lifecycle and writer here, its reads
(``store_reads.py``), and the rows both lay out (``store_rows.py``).

Writes never block the event loop: they are queued to one writer thread that
commits them in batches (later writes of the same run or task replace earlier
ones in a batch). A live run hands its task rows and events over as one queued
batch (``put_batch``) rather than one item each, so a batch is never split
across transactions. Reads run in worker threads on their own connection (WAL
mode, so they never wait for the writer). ``flush()`` waits until everything
queued so far is committed.

A stage's plan (its tasks as planned, before any runs) is stored once, as rows of ``plans``
of up to ``TASK_ROWS_PER_STATEMENT`` tasks each (consecutive sequence numbers, the JSON list of
``[seq, task_id, stage, input_index, action_index, agent, action, params]``), and a task gets its row
of ``tasks`` only when it changes (starts, ends, is cancelled). Reads put the two together: a
planned task without a row is PENDING, as its row would have said. A pending row per planned
task cost the writer more than all the rest of a map stage's writes (bench/map_profile.py).
Stores written before plans were hold pending rows and read as they did.

Events of one run committed together with consecutive sequence numbers (a live
run's, handed over in batches) share rows of ``events``, up to ``EVENTS_PER_ROW``
to a row: its kind is ``EVENTS_ROW``, its sequence and time those of the last
event in it, its body the JSON list of ``[sequence, time, kind, body]``. A map stage writes two events per
task; a row each cost the writer more than their JSON did (bench/RESULTS.md,
"Batching"). Rows of one event each (an event written alone, and every event of a
store written before this) read as they always did.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import anyio
import structlog

from ether_host import sqlite
from ether_host.workflows.model import RunEvent, TaskRecord
from ether_host.workflows.store_reads import RunStoreReads
from ether_host.workflows.store_rows import (
    EVENTS_PER_ROW,
    EVENTS_ROW,
    TASK_ROWS_PER_STATEMENT,
    TASK_ROWS_SQL,
    TaskRow,
    json_body,
    row_epoch,
    rows_of_events,
    rows_of_plans,
    rows_of_tasks,
)

log = structlog.get_logger("ether.workflows")

# The rows' names are read from here (writes.py, tests/workflows/test_store_rows.py), as before
# the split.
__all__ = ["EVENTS_PER_ROW", "EVENTS_ROW", "TASK_ROWS_PER_STATEMENT", "RunStore", "TaskRow"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    request_id TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_time ON runs (created_at DESC);
CREATE TABLE IF NOT EXISTS tasks (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    task_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    state TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    time REAL NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (run_id, sequence)
);
"""
PLANS = """
CREATE TABLE IF NOT EXISTS plans (
    run_id TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    stage TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (run_id, first_seq)
);
"""
# Schema migrations in order (ether_host/sqlite.py); the first is the schema as it was before
# the store was versioned.
MIGRATIONS = (SCHEMA, PLANS)
BATCH = 5000


class _Barrier:
    def __init__(self) -> None:
        self.done = threading.Event()


class RunStore(RunStoreReads):
    """SQLite persistence of runs, tasks and events."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._queue: queue.SimpleQueue[tuple[str, Any] | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._read: sqlite3.Connection | None = None
        self._read_lock = threading.Lock()
        self.failed: BaseException | None = None
        # Rows handed over in batches and rows of them committed: each counter has one writer
        # (the event loop, the writer thread), so their difference needs no lock.
        self._rows_queued = 0
        self._rows_committed = 0

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        """Create or migrate the schema and start the writer (blocking; call from a worker
        thread)."""
        connection = sqlite.connect(self.path, MIGRATIONS)
        self._read = self._connect()
        self._writer = threading.Thread(
            target=self._write_loop, args=(connection,), name="run-store-writer", daemon=True
        )
        self._writer.start()

    def close(self) -> None:
        """Commit what is queued, then stop the writer (blocking)."""
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join()
            self._writer = None
        if self._read is not None:
            self._read.close()
            self._read = None

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA busy_timeout=5000")
        return connection

    # -- writes (queued) ------------------------------------------------------------------

    def put_run(self, body: dict[str, Any]) -> None:
        self._queue.put(("run", body))

    def put_task(self, run_id: str, body: dict[str, Any]) -> None:
        self._queue.put(("task", (run_id, body)))

    def add_event(self, run_id: str, event: RunEvent) -> None:
        self._queue.put(("event", (run_id, event)))

    def put_batch(
        self,
        run_id: str,
        tasks: list[dict[str, Any] | TaskRow],
        events: list[RunEvent],
        planned: list[TaskRecord] | None = None,
    ) -> None:
        """Task rows, events and newly planned tasks (as planned: their plan's fields are never
        changed afterwards, so the writer thread may read them) of one run, committed in the
        same transaction. Planned tasks are not rows the writer is behind by (``backlog``)."""
        self._rows_queued += len(tasks) + len(events)
        self._queue.put(("batch", (run_id, tasks, events, planned or [])))

    def backlog(self, after: int = 0) -> int:
        """Rows of batches handed over and not committed yet: what the writer is behind by;
        only those handed over after ``after`` (a ``handed_over()`` of before)."""
        return self._rows_queued - max(self._rows_committed, after)

    def handed_over(self) -> int:
        """Rows of batches handed over so far (the writer commits them in order)."""
        return self._rows_queued

    def delete_runs(self, run_ids: list[str]) -> None:
        """Delete runs with their tasks and events (after the writes queued before)."""
        self._queue.put(("delete", run_ids))

    async def flush(self) -> None:
        """Wait until every write queued before this call is committed."""
        barrier = _Barrier()
        self._queue.put(("barrier", barrier))
        if not barrier.done.is_set():
            await anyio.to_thread.run_sync(barrier.done.wait, abandon_on_cancel=True)

    def _write_loop(self, connection: sqlite3.Connection) -> None:
        # A turn's batch is dropped with the call's frame before the writer waits for the next:
        # as locals of this loop it stayed alive until the next write came, and a run's last
        # write is its row with its result (a 100,000-task map's: 22 MiB of Python objects, held
        # for as long as the host stayed idle after the run).
        while self._write_next(connection):
            pass
        connection.close()

    def _write_next(self, connection: sqlite3.Connection) -> bool:
        """Commit the next batch of queued writes (blocking until one comes); False once the
        store is closing."""
        stopping = False
        item = self._queue.get()
        batch: list[tuple[str, Any] | None] = [item]
        size = _size(item)
        while size < BATCH:
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            batch.append(more)
            size += _size(more)
        runs: dict[str, dict[str, Any]] = {}
        tasks: dict[tuple[str, int], tuple[str, dict[str, Any] | TaskRow]] = {}
        events: list[tuple[str, RunEvent]] = []
        plans: list[tuple[str, list[TaskRecord]]] = []
        deleted: list[str] = []
        barriers: list[_Barrier] = []
        batched = 0
        for entry in batch:
            if entry is None:
                stopping = True
                continue
            kind, payload = entry
            if kind == "run":
                runs[payload["id"]] = payload
            elif kind == "task":
                tasks[(payload[0], int(payload[1]["seq"]))] = payload
            elif kind == "event":
                events.append(payload)
            elif kind == "batch":
                run_id, rows, more_events, planned = payload
                batched += len(rows) + len(more_events)
                if planned:
                    plans.append((run_id, planned))
                for row in rows:
                    seq = row.seq if isinstance(row, TaskRow) else int(row["seq"])
                    tasks[(run_id, seq)] = (run_id, row)
                events.extend((run_id, event) for event in more_events)
            elif kind == "delete":
                deleted.extend(payload)
            else:
                barriers.append(payload)
        try:
            self._commit(connection, runs.values(), tasks.values(), events, plans, deleted)
        except Exception as error:
            self.failed = error
            log.error("run store write failed", error=str(error), path=str(self.path))
        self._rows_committed += batched
        for barrier in barriers:
            barrier.done.set()
        return not stopping

    @staticmethod
    def _commit(
        connection: sqlite3.Connection,
        runs: Iterable[dict[str, Any]],
        tasks: Collection[tuple[str, dict[str, Any] | TaskRow]],
        events: list[tuple[str, RunEvent]],
        plans: list[tuple[str, list[TaskRecord]]],
        deleted: list[str],
    ) -> None:
        run_rows = [
            (
                r["id"],
                row_epoch(r),
                r.get("name", ""),
                r["state"],
                r.get("request_id", ""),
                json_body(r),
            )
            for r in runs
        ]
        event_rows = rows_of_events(events)
        plan_rows = rows_of_plans(plans)
        if not (run_rows or tasks or event_rows or plan_rows or deleted):
            return
        connection.execute("BEGIN")
        try:
            connection.executemany(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?)", run_rows
            )
            connection.executemany("INSERT OR REPLACE INTO plans VALUES (?, ?, ?, ?, ?)", plan_rows)
            for run_id, rows in rows_of_tasks(tasks):
                connection.execute(TASK_ROWS_SQL, (run_id, rows))
            connection.executemany(
                "INSERT OR REPLACE INTO events VALUES (?, ?, ?, ?, ?)", event_rows
            )
            # Deleted runs have ended: nothing queued before their delete writes them again.
            gone = [(run_id,) for run_id in deleted]
            tables = (
                ("runs", "id"),
                ("tasks", "run_id"),
                ("plans", "run_id"),
                ("events", "run_id"),
            )
            for table, column in tables:
                connection.executemany(f"DELETE FROM {table} WHERE {column} = ?", gone)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")


def _size(item: tuple[str, Any] | None) -> int:
    """Rows a queued item writes: a batch counts as its rows (a plan's as the rows of
    ``plans`` it makes), so a transaction stays bounded."""
    if item is not None and item[0] == "batch":
        planned = len(item[1][3])
        return 1 + len(item[1][1]) + len(item[1][2]) + -(-planned // TASK_ROWS_PER_STATEMENT)
    return 1
