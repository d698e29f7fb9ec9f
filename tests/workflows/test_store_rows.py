"""The run store's rows for a live run's events and finished tasks (workflows/store.py,
writes.py), on a real SQLite file: events handed over together share rows and read back one by
one, their bodies as values or as JSON encoded once; what orjson refuses (an integer past 64
bits) is written by json and reads back exact."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ether_host.workflows.model import RunEvent, TaskRecord, encoded
from ether_host.workflows.store import EVENTS_PER_ROW, EVENTS_ROW, TASK_ROWS_PER_STATEMENT, RunStore
from ether_host.workflows.writes import PendingWrites

HUGE = 2**70


def _stored(
    path: Path, run_id: str, after: int = 0, upto: int | None = None, limit: int = 1000
) -> tuple[list[RunEvent], list[dict[str, Any]], list[str]]:
    store = RunStore(path)
    store.open()
    try:
        kinds = [
            row[0] for row in store._query("SELECT kind FROM events WHERE run_id = ?", (run_id,))
        ]
        return store.events(run_id, after, upto, limit), store.tasks(run_id), kinds
    finally:
        store.close()


def _written(path: Path, run_id: str, write: Any) -> None:
    async def main() -> None:
        store = RunStore(path)
        store.open()
        try:
            write(PendingWrites(run_id, store))
            await store.flush()
        finally:
            store.close()

    asyncio.run(main())


def _task(seq: int) -> TaskRecord:
    task = TaskRecord(seq, f"run-x-{seq}", "map", seq - 1, 0, "a", "b", {"input": seq})
    task.state, task.attempts = "SUCCEEDED", 1
    return task


def test_events_of_both_shapes_and_a_huge_integer_read_back_exact(tmp_path: Path) -> None:
    bodies = [
        {"task": {"task_id": "run-x-1", "n": 1}},
        {"task": {"task_id": "run-x-2", "n": HUGE}},  # orjson refuses it: kept as values
        {"stage": "map", "tasks": {"total": 2}},
    ]
    events = [RunEvent(i + 1, 1.5 + i, "task_started", encoded(b)) for i, b in enumerate(bodies)]
    assert isinstance(events[0].body, bytes) and isinstance(events[1].body, dict)

    def write(writes: PendingWrites) -> None:
        for event in events:
            writes.event(event)
        writes.flush()

    _written(tmp_path / "runs.db", "run-x", write)
    read, _, kinds = _stored(tmp_path / "runs.db", "run-x")
    assert kinds == [EVENTS_ROW]  # three events, one row
    assert [(e.sequence, e.time, e.kind, e.data()) for e in read] == [
        (i + 1, 1.5 + i, "task_started", b) for i, b in enumerate(bodies)
    ]
    assert read[1].data()["task"]["n"] == HUGE


def test_a_finished_tasks_row_is_its_completed_event_with_seq_and_depth(tmp_path: Path) -> None:
    tasks = [_task(1), _task(2)]
    tasks[1].params = {"input": HUGE}

    def write(writes: PendingWrites) -> None:
        for number, task in enumerate(tasks, 1):
            body = writes.task_completed(task, task.api())
            writes.event(RunEvent(number, 2.0, "task_completed", body))
        writes.flush()

    _written(tmp_path / "runs.db", "run-x", write)
    read, rows, _ = _stored(tmp_path / "runs.db", "run-x")
    for task, event, row in zip(tasks, read, rows, strict=True):
        assert event.data() == {"task": task.api()}
        assert row == {**task.api(), "seq": task.seq, "depth": task.depth}
        assert TaskRecord.from_stored(row).params == task.params
    assert rows[1]["params"]["input"] == HUGE


def test_a_row_holds_at_most_events_per_row_and_reads_from_inside_a_row(tmp_path: Path) -> None:
    count = 2 * EVENTS_PER_ROW + 88
    events = [RunEvent(i, float(i), "task_started", encoded({"n": i})) for i in range(1, count + 1)]

    def write(writes: PendingWrites) -> None:
        for event in events:
            writes.event(event)
        writes.flush()

    path = tmp_path / "runs.db"
    _written(path, "run-x", write)
    read, _, kinds = _stored(path, "run-x")
    assert kinds == [EVENTS_ROW] * 3
    assert [e.data()["n"] for e in read] == list(range(1, count + 1))
    inside = EVENTS_PER_ROW + 10  # in the second row, past its first event
    assert [e.sequence for e in _stored(path, "run-x", inside, limit=100)[0]] == list(
        range(inside + 1, inside + 101)
    )
    assert [e.sequence for e in _stored(path, "run-x", 5, upto=EVENTS_PER_ROW + 3)[0]] == list(
        range(6, EVENTS_PER_ROW + 4)
    )


def test_task_rows_of_two_runs_past_one_statement_each_read_back_whole(tmp_path: Path) -> None:
    """More task rows than one statement takes (a map's plan), of two runs, planned rows and
    finished ones: every row of each run reads back, in order, exact."""
    count = 2 * TASK_ROWS_PER_STATEMENT + 7
    planned = [_task(seq) for seq in range(1, count + 1)]
    for task in planned:
        task.state, task.attempts = "PENDING", 0
    planned[-1].params = {"input": HUGE, "text": 'é "quoted" \\ back'}
    finished = [_task(seq) for seq in range(1, TASK_ROWS_PER_STATEMENT + 3)]

    async def main() -> None:
        store = RunStore(tmp_path / "runs.db")
        store.open()
        try:
            for run_id, tasks in (("run-x", planned), ("run-y", finished)):
                writes = PendingWrites(run_id, store)
                for task in tasks:
                    if task.state == "PENDING":
                        writes.task(task)
                    else:
                        writes.task_completed(task, task.api())
                writes.flush()
            await store.flush()
        finally:
            store.close()

    asyncio.run(main())
    for run_id, tasks in (("run-x", planned), ("run-y", finished)):
        rows = _stored(tmp_path / "runs.db", run_id)[1]
        assert rows == [{**t.api(), "seq": t.seq, "depth": t.depth} for t in tasks]


def test_a_stages_plan_reads_back_as_pending_tasks_until_each_has_a_row(tmp_path: Path) -> None:
    """A stage's plan is stored once, not as a row per task (what a resume after a kill -9 and
    ListTasks of a stored run read): each planned task reads back PENDING, as its pending row
    did, until a row of its own replaces it; the stage and state filters and a page of sequence
    numbers see the same tasks, across the plan's rows; a deleted run leaves none of it."""
    count = TASK_ROWS_PER_STATEMENT + 5
    planned = [
        TaskRecord(seq, f"run-x-{seq}", "map", seq - 1, 0, "a", "b", {"input": seq})
        for seq in range(1, count + 1)
    ]
    planned[-2].params = {"input": HUGE}  # orjson refuses it: the plan's row by json
    finished = {3: _task(3), count: _task(count)}  # one in each of the plan's rows
    later = TaskRecord(count + 1, f"run-x-{count + 1}", "reduce", 0, 0, "a", "c", {})
    path = tmp_path / "runs.db"

    def write(writes: PendingWrites) -> None:
        writes.plan(planned)
        writes.flush()
        for task in finished.values():
            writes.task_completed(task, task.api())
        writes.task(later)
        writes.flush()

    _written(path, "run-x", write)
    expected = [finished[t.seq].stored() if t.seq in finished else t.stored() for t in planned] + [
        later.stored()
    ]
    assert [t["state"] for t in expected].count("RUN_TASK_STATE_PENDING") == count - 1
    store = RunStore(path)
    store.open()
    try:
        assert store.tasks("run-x") == expected
        assert store.tasks("run-x", [2, 3, count + 1]) == [expected[1], expected[2], expected[-1]]
        assert store.task_seqs("run-x", "", "RUN_TASK_STATE_SUCCEEDED") == [3, count]
        assert store.task_seqs("run-x", "map", "RUN_TASK_STATE_PENDING") == [
            seq for seq in range(1, count + 1) if seq not in finished
        ]
        assert store.task_seqs("run-x", "reduce", "") == [count + 1]
        assert store.task_seqs("run-x", "", "") == list(range(1, count + 2))
        assert store.tasks("run-x", [count - 1])[0]["params"]["input"] == HUGE
    finally:
        store.close()

    async def delete() -> None:
        store = RunStore(path)
        store.open()
        try:
            store.delete_runs(["run-x"])
            await store.flush()
            assert store.tasks("run-x") == [] and store.task_seqs("run-x", "", "") == []
        finally:
            store.close()

    asyncio.run(delete())
