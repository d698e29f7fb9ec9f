"""How the run store lays out its rows (store.py's docstring says why): a task's row
(``TaskRow``), a run's task rows of a commit as statements (``TASK_ROWS_SQL``), a stage's plan as
rows of ``plans``, a run's events several to a row of ``events`` and taken apart again, and the
JSON of them. Functions of what they are given, apart from the writer (store.py) and the reads
(store_reads.py) that use them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import orjson

from ether_host.workflows.model import RunEvent, TaskRecord, parse_rfc3339

# The kind of a row of ``events`` holding several events: no event kind (a
# StreamRunEventsResponse oneof member name) starts with "+".
EVENTS_ROW = "+events"
# At most this many events to a row: a reader from a sequence inside a row decodes the whole row,
# and a page of events read holds one row's events beyond it.
EVENTS_PER_ROW = 256
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


def rows_of_tasks(
    tasks: Iterable[tuple[str, dict[str, Any] | TaskRow]],
) -> Iterator[tuple[str, str]]:
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
            else (int(t["seq"]), t["task_id"], t["stage"], t["state"], json_body(t))
        )
    if rows:
        assert run is not None
        yield run, orjson.dumps(rows).decode()


def rows_of_plans(
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
    body = json_body(
        [
            [t.seq, t.task_id, t.stage, t.input_index, t.action_index, t.agent, t.action, t.params]
            for t in chunk
        ]
    )
    return run_id, chunk[0].seq, chunk[-1].seq, chunk[0].stage, body


def rows_of_events(events: list[tuple[str, RunEvent]]) -> list[tuple[str, int, float, str, str]]:
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
            text = body.decode() if isinstance(body, bytes) else json_body(body)
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


def row_events(sequence: int, at: float, kind: str, body: str) -> list[RunEvent]:
    """The events a row of ``events`` holds: itself, or the list of an ``EVENTS_ROW``."""
    if kind != EVENTS_ROW:
        return [RunEvent(sequence, at, kind, json.loads(body))]
    return [RunEvent(*item) for item in json.loads(body)]


def json_body(body: Any) -> str:
    """``body`` as JSON text. orjson is several times faster than json, and this thread holds
    the GIL while it encodes, against the event loop; json writes what orjson refuses (an
    integer past 64 bits)."""
    try:
        return orjson.dumps(body).decode()
    except TypeError:
        return json.dumps(body)


def row_epoch(body: dict[str, Any]) -> float:
    return parse_rfc3339(body["created_at"]) if body.get("created_at") else 0.0
