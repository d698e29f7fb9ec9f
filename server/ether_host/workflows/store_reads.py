"""The run store's reads (``RunStoreReads``, a part of ``RunStore``): runs, a run's tasks (a
planned task without a row of its own read as pending) and its events (a row of several taken
apart), on the store's read connection. Apart from store.py, whose writer thread they never
wait for (WAL mode)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ether_host.workflows.model import RunEvent, RunState, TaskRecord
from ether_host.workflows.store_rows import row_events

PLANNED_STATE = "RUN_TASK_STATE_PENDING"  # a planned task's state until it has a row
_HELD_SQL = "SELECT seq FROM tasks WHERE run_id = ?"
ENDED = tuple(sorted(f"RUN_STATE_{state}" for state in RunState.ENDED))


class RunStoreReads:
    """The reads of a ``RunStore``, on the read connection it opens and closes."""

    _read: sqlite3.Connection | None
    _read_lock: threading.Lock

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
                    for event in row_events(*row):
                        if event.sequence <= after:
                            continue
                        if len(found) >= limit or (upto is not None and event.sequence > upto):
                            return found
                        found.append(event)
            finally:
                cursor.close()
        return found
