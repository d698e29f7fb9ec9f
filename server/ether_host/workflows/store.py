"""The run store: runs, their tasks and events in SQLite under the state directory.

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

import json
import queue
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import orjson
import structlog

from ether_host import sqlite
from ether_host.workflows.model import RunEvent, RunState, TaskRecord, parse_rfc3339

log = structlog.get_logger("ether.workflows")

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
# The kind of a row of ``events`` holding several events: no event kind (a
# StreamRunEventsResponse oneof member name) starts with "+".
EVENTS_ROW = "+events"
# At most this many events to a row: a reader from a sequence inside a row decodes the whole row,
# and a page of events read holds one row's events beyond it.
EVENTS_PER_ROW = 256
PLANNED_STATE = "RUN_TASK_STATE_PENDING"  # a planned task's state until it has a row
_HELD_SQL = "SELECT seq FROM tasks WHERE run_id = ?"
ENDED = tuple(sorted(f"RUN_STATE_{state}" for state in RunState.ENDED))
# A run's task rows of a commit in one statement, unpacked from a JSON array by SQLite, rather
# than an executemany: the sqlite3 module lets go of the GIL for each row's step and must take
# it back for the next, and with the event loop busy (a map stage) each take waited for its
# switch interval, so the writer fell behind the stage and held it back (MAX_BACKLOG,
# stage_pipe.py). One statement takes the GIL back once. Up to TASK_ROWS_PER_STATEMENT rows to
# one: the JSON of a 100,000-task map's plan in one piece, with SQLite's parse of it, raised the
# host's peak RSS by ~90 MiB.
TASK_ROWS_PER_STATEMENT = 1000
# json_extract, not the ->> operator: that needs SQLite 3.38 (2022), and a Python linked to an
# older library (Ubuntu 22.04's 3.37) would fail every commit of a run.
TASK_ROWS_SQL = (
    "INSERT OR REPLACE INTO tasks SELECT ?, json_extract(value, '$[0]'), "
    "json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'), "
    "json_extract(value, '$[4]') FROM json_each(?)"
)


class TaskRow(NamedTuple):
    """A task's row with its body encoded already (a finished task of a live run: the JSON of
    its task_completed event's task, with ``seq`` and ``depth``)."""

    seq: int
    task_id: str
    stage: str
    state: str
    body: bytes


class _Barrier:
    def __init__(self) -> None:
        self.done = threading.Event()


class RunStore:
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
                _epoch(r),
                r.get("name", ""),
                r["state"],
                r.get("request_id", ""),
                _json(r),
            )
            for r in runs
        ]
        event_rows = _event_rows(events)
        plan_rows = _plan_rows(plans)
        if not (run_rows or tasks or event_rows or plan_rows or deleted):
            return
        connection.execute("BEGIN")
        try:
            connection.executemany(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?)", run_rows
            )
            connection.executemany("INSERT OR REPLACE INTO plans VALUES (?, ?, ?, ?, ?)", plan_rows)
            for run_id, rows in _task_rows(tasks):
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

    # -- reads (blocking; run them with anyio.to_thread.run_sync) --------------------------

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        assert self._read is not None, "run store is not open"
        with self._read_lock:
            return self._read.execute(sql, args).fetchall()

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        rows = self._query("SELECT body FROM runs WHERE id = ?", (run_id,))
        return json.loads(rows[0][0]) if rows else None

    def run_keys(self, states: list[str], name: str) -> list[tuple[float, int, str]]:
        """(created_at, rowid, id) of the runs matching the filters, newest first: the sort key
        ListRuns pages by (rowid breaks ties between runs created in the same instant)."""
        sql, args = "SELECT created_at, rowid, id FROM runs WHERE 1=1", []
        if states:
            sql += f" AND state IN ({', '.join('?' for _ in states)})"
            args.extend(states)
        if name:
            sql += " AND name = ?"
            args.append(name)
        sql += " ORDER BY created_at DESC, rowid DESC"
        return [(row[0], row[1], row[2]) for row in self._query(sql, tuple(args))]

    def runs(self, ids: list[str]) -> list[dict[str, Any]]:
        if not ids:
            return []
        rows = self._query(
            f"SELECT id, body FROM runs WHERE id IN ({', '.join('?' for _ in ids)})", tuple(ids)
        )
        found = {row[0]: json.loads(row[1]) for row in rows}
        return [found[i] for i in ids if i in found]

    def runs_in_states(self, states: list[str]) -> list[dict[str, Any]]:
        rows = self._query(
            f"SELECT body FROM runs WHERE state IN ({', '.join('?' for _ in states)})",
            tuple(states),
        )
        return [json.loads(row[0]) for row in rows]

    def ended_runs_to_delete(self, keep: int, created_before: float) -> list[str]:
        """Ids of the ended runs past the newest ``keep`` ended ones (0: none is past) or
        created before ``created_before`` (epoch seconds)."""
        rows = self._query(
            f"SELECT id, created_at FROM runs WHERE state IN ({', '.join('?' for _ in ENDED)}) "
            "ORDER BY created_at DESC, rowid DESC",
            ENDED,
        )
        return [
            run_id
            for index, (run_id, created_at) in enumerate(rows)
            if (keep and index >= keep) or created_at < created_before
        ]

    def count_by_state(self) -> dict[str, int]:
        """How many runs are held in each state (RUN_STATE_...), for the metrics scrape."""
        rows = self._query("SELECT state, count(*) FROM runs GROUP BY state")
        return {row[0]: int(row[1]) for row in rows}

    def request_ids(self) -> dict[str, str]:
        return {
            row[0]: row[1]
            for row in self._query("SELECT request_id, id FROM runs WHERE request_id != ''")
        }

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """The read connection inside one read transaction: a task's row and its stage's plan
        read from the same committed state."""
        assert self._read is not None, "run store is not open"
        with self._read_lock:
            self._read.execute("BEGIN")
            try:
                yield self._read
            finally:
                self._read.execute("COMMIT")

    def task_seqs(self, run_id: str, stage: str, state: str) -> list[int]:
        sql, args = "SELECT seq FROM tasks WHERE run_id = ?", [run_id]
        if stage:
            sql += " AND stage = ?"
            args.append(stage)
        if state:
            sql += " AND state = ?"
            args.append(state)
        plan_sql, plan_args = "SELECT first_seq, last_seq FROM plans WHERE run_id = ?", [run_id]
        if stage:
            plan_sql += " AND stage = ?"
            plan_args.append(stage)
        with self._snapshot() as read:
            seqs = [row[0] for row in read.execute(sql + " ORDER BY seq", tuple(args))]
            if state and state != PLANNED_STATE:
                return seqs
            spans = read.execute(plan_sql, tuple(plan_args)).fetchall()
            if not spans:
                return seqs
            held = {row[0] for row in read.execute(_HELD_SQL, (run_id,))}
        seqs.extend(s for first, last in spans for s in range(first, last + 1) if s not in held)
        return sorted(seqs)

    def tasks(self, run_id: str, seqs: list[int] | None = None) -> list[dict[str, Any]]:
        """Task bodies of a run in creation order (all of them, or the given ones); a planned
        task without a row of its own as its pending row would have been."""
        if seqs is not None and not seqs:
            return []
        plan_sql = "SELECT body FROM plans WHERE run_id = ?"
        plan_args: list[Any] = [run_id]
        with self._snapshot() as read:
            if seqs is None:
                rows = read.execute(
                    "SELECT seq, body FROM tasks WHERE run_id = ?", (run_id,)
                ).fetchall()
            else:
                rows = read.execute(
                    f"SELECT seq, body FROM tasks WHERE run_id = ? AND seq IN ({', '.join('?' for _ in seqs)})",
                    (run_id, *seqs),
                ).fetchall()
                plan_sql += " AND last_seq >= ? AND first_seq <= ?"
                plan_args += [min(seqs), max(seqs)]
            plans = [row[0] for row in read.execute(plan_sql, tuple(plan_args))]
        found = {seq: json.loads(body) for seq, body in rows}
        wanted = None if seqs is None else set(seqs)
        for plan in plans:
            for seq, task_id, stage, input_index, action_index, agent, action, params in json.loads(
                plan
            ):
                if seq not in found and (wanted is None or seq in wanted):
                    found[seq] = TaskRecord(
                        seq, task_id, stage, input_index, action_index, agent, action, params
                    ).stored()
        return [found[seq] for seq in sorted(found)]

    def last_event(self, run_id: str) -> int:
        rows = self._query("SELECT MAX(sequence) FROM events WHERE run_id = ?", (run_id,))
        return int(rows[0][0] or 0) if rows else 0

    def events(
        self, run_id: str, after: int, upto: int | None = None, limit: int = 1000
    ) -> list[RunEvent]:
        """Events of a run with after < sequence (<= upto), in order, at most ``limit``."""
        # A row of several events is keyed by its last one: every row past ``after`` holds
        # events past it, the first may hold some before it too; rows are read in order until
        # ``limit`` events, or one past ``upto``, are found.
        assert self._read is not None, "run store is not open"
        found: list[RunEvent] = []
        with self._read_lock:
            cursor = self._read.execute(
                "SELECT sequence, time, kind, body FROM events WHERE run_id = ? AND sequence > ? "
                "ORDER BY sequence",
                (run_id, after),
            )
            try:
                for row in cursor:  # one row at a time: a row holds up to EVENTS_PER_ROW
                    for event in _row_events(*row):
                        if event.sequence <= after:
                            continue
                        if len(found) >= limit or (upto is not None and event.sequence > upto):
                            return found
                        found.append(event)
            finally:
                cursor.close()
        return found


def _size(item: tuple[str, Any] | None) -> int:
    """Rows a queued item writes: a batch counts as its rows (a plan's as the rows of
    ``plans`` it makes), so a transaction stays bounded."""
    if item is not None and item[0] == "batch":
        planned = len(item[1][3])
        return 1 + len(item[1][1]) + len(item[1][2]) + -(-planned // TASK_ROWS_PER_STATEMENT)
    return 1


def _task_rows(tasks: Iterable[tuple[str, dict[str, Any] | TaskRow]]) -> Iterator[tuple[str, str]]:
    """Task rows for ``TASK_ROWS_SQL``: (run id, a JSON array of up to ``TASK_ROWS_PER_STATEMENT``
    of its rows as ``[seq, task_id, stage, state, body]``), built a statement at a time. Text:
    SQLite from 3.45 takes a blob for its binary JSON."""
    run: str | None = None
    rows: list[tuple[int, str, str, str, str]] = []
    for run_id, t in tasks:
        if rows and (run_id != run or len(rows) >= TASK_ROWS_PER_STATEMENT):
            assert run is not None
            yield run, orjson.dumps(rows).decode()
            rows = []
        run = run_id
        rows.append(
            (t.seq, t.task_id, t.stage, t.state, t.body.decode())
            if isinstance(t, TaskRow)
            else (int(t["seq"]), t["task_id"], t["stage"], t["state"], _json(t))
        )
    if rows:
        assert run is not None
        yield run, orjson.dumps(rows).decode()


def _plan_rows(
    plans: list[tuple[str, list[TaskRecord]]],
) -> list[tuple[str, int, int, str, str]]:
    """Rows of ``plans``: (run id, first seq, last seq, stage, the JSON list of its tasks as
    ``[seq, task_id, stage, input_index, action_index, agent, action, params]``), a row of up
    to ``TASK_ROWS_PER_STATEMENT`` tasks with consecutive sequence numbers."""
    rows = []
    for run_id, planned in plans:
        chunk: list[TaskRecord] = []
        for task in planned:
            if chunk and (
                len(chunk) >= TASK_ROWS_PER_STATEMENT
                or task.seq != chunk[-1].seq + 1
                or task.stage != chunk[0].stage
            ):
                rows.append(_plan_row(run_id, chunk))
                chunk = []
            chunk.append(task)
        if chunk:
            rows.append(_plan_row(run_id, chunk))
    return rows


def _plan_row(run_id: str, chunk: list[TaskRecord]) -> tuple[str, int, int, str, str]:
    body = _json(
        [
            [t.seq, t.task_id, t.stage, t.input_index, t.action_index, t.agent, t.action, t.params]
            for t in chunk
        ]
    )
    return run_id, chunk[0].seq, chunk[-1].seq, chunk[0].stage, body


def _event_rows(events: list[tuple[str, RunEvent]]) -> list[tuple[str, int, float, str, str]]:
    """Rows of ``events``: a run's events with consecutive sequence numbers in one row
    (``EVENTS_ROW``), an event without such a neighbour in a row of its own."""
    groups: list[tuple[str, list[RunEvent]]] = []
    for run_id, event in events:
        if groups:
            last_run, group = groups[-1]
            if (
                last_run == run_id
                and group[-1].sequence + 1 == event.sequence
                and len(group) < EVENTS_PER_ROW
            ):
                group.append(event)
                continue
        groups.append((run_id, [event]))
    rows = []
    for run_id, group in groups:
        last = group[-1]
        if len(group) == 1:
            body = last.body
            text = body.decode() if isinstance(body, bytes) else _json(body)
            rows.append((run_id, last.sequence, last.time, last.kind, text))
        else:
            rows.append((run_id, last.sequence, last.time, EVENTS_ROW, _events_json(group)))
    return rows


def _events_json(group: list[RunEvent]) -> str:
    """The body of an ``EVENTS_ROW``: bodies encoded already go in as they are."""
    try:
        return orjson.dumps(
            [
                [e.sequence, e.time, e.kind, orjson.Fragment(e.body)]
                if isinstance(e.body, bytes)
                else [e.sequence, e.time, e.kind, e.body]
                for e in group
            ]
        ).decode()
    except TypeError:  # an integer past 64 bits: json writes it
        return json.dumps([[e.sequence, e.time, e.kind, e.data()] for e in group])


def _row_events(sequence: int, at: float, kind: str, body: str) -> list[RunEvent]:
    """The events a row of ``events`` holds: itself, or the list of an ``EVENTS_ROW``."""
    if kind != EVENTS_ROW:
        return [RunEvent(sequence, at, kind, json.loads(body))]
    return [RunEvent(*item) for item in json.loads(body)]


def _json(body: Any) -> str:
    """``body`` as JSON text. orjson is several times faster than json, and this thread holds
    the GIL while it encodes, against the event loop; json writes what orjson refuses (an
    integer past 64 bits)."""
    try:
        return orjson.dumps(body).decode()
    except TypeError:
        return json.dumps(body)


def _epoch(body: dict[str, Any]) -> float:
    return parse_rfc3339(body["created_at"]) if body.get("created_at") else 0.0
