"""What a live run changed and has not handed to the store yet, handed over in batches.

A map stage changes thousands of task rows and appends thousands of events a second. Handed
to the store one at a time, each change cost a task row built as JSON at every state a task
passed through and a queued item of its own, more than running the task did (bench/RESULTS.md,
"Batching"). Here changes wait at most ``FLUSH_AFTER`` seconds and go to the store as one batch,
committed in one transaction: a task row is built once for all the states it passed through
meanwhile (a task that started and finished inside one window is written once, finished).

What the store holds is therefore at most ``FLUSH_AFTER`` behind the run; a ``kill -9`` loses
at most that much, and a run resumed after it continues from what was committed (a task whose
end was lost runs again, or, not idempotent, fails ``interrupted`` when its start was kept).
A stage's plan goes over the same way, once, as the tasks planned (``plan``): the store keeps
it as its ``plans`` rows, and a planned task gets a row of its own only when it changes.

Everything is handed over before the run's own row is written (``save_run``), so a stored run
never names an event or a task state the store does not hold, and a run's end is written whole.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ether_host.workflows.model import RunEvent, TaskRecord, encoded
from ether_host.workflows.store import RunStore, TaskRow

FLUSH_AFTER = 0.02  # seconds a change may wait for the next batch


class PendingWrites:
    """Task rows and events of one run, waiting for the next batch to the store."""

    def __init__(self, run_id: str, store: RunStore) -> None:
        self.run_id = run_id
        self._store = store
        # seq -> the task (its row is built at the flush) or its row, built already
        self._tasks: dict[int, TaskRecord | dict[str, Any] | TaskRow] = {}
        self._events: list[RunEvent] = []
        self._planned: list[TaskRecord] = []
        self._timer: asyncio.TimerHandle | None = None

    def task(self, task: TaskRecord) -> None:
        """Write ``task`` as it is at the next flush."""
        self._tasks[task.seq] = task
        self._schedule()

    def task_completed(self, task: TaskRecord, body: dict[str, Any]) -> dict[str, Any] | bytes:
        """Write ``body`` (``task.api()`` as the attempt ended) as the task's row; the body of its
        task_completed event, encoded once for both (``encoded``)."""
        text = encoded(body)
        if isinstance(text, bytes):
            row: dict[str, Any] | TaskRow = TaskRow(
                task.seq,
                task.task_id,
                task.stage,
                body["state"],
                b'%b,"seq":%d,"depth":%d}' % (text[:-1], task.seq, task.depth),
            )
            event: dict[str, Any] | bytes = b'{"task":%b}' % text
        else:
            row, event = {**body, "seq": task.seq, "depth": task.depth}, {"task": body}
        self._tasks[task.seq] = row
        self._schedule()
        return event

    def plan(self, tasks: list[TaskRecord]) -> None:
        """Store ``tasks``, just planned and PENDING, as their stage's plan at the next flush;
        a later ``task`` of one of them writes its own row."""
        self._planned.extend(tasks)
        self._schedule()

    def event(self, event: RunEvent) -> None:
        self._events.append(event)
        self._schedule()

    def flush(self) -> None:
        """Hand everything waiting to the store now, as one batch."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not (self._tasks or self._events or self._planned):
            return
        rows = [t.stored() if isinstance(t, TaskRecord) else t for t in self._tasks.values()]
        events, self._events = self._events, []
        planned, self._planned = self._planned, []
        self._tasks = {}
        self._store.put_batch(self.run_id, rows, events, planned)

    def _schedule(self) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_AFTER, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self.flush()
