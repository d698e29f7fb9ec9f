"""A stage's tasks through the dispatcher's batch path (``Dispatcher.execute_batch``, what a
batched ``AgentIOService.Pipe`` stream runs on), with the run store as the stage's slow reader.

Every task of the stage holds one of the stage's slots while it runs (followed next actions
too): the feeder takes the slots that are free, up to ``FEED`` at a time, and hands their tasks
to the dispatcher as one batch; each task's first attempt is then sent without a coroutine of its
own, its events and its end come back through callbacks (``StageCalls``), and its slot frees as
it ends. A task that runs again (the stage's retry policy) goes on in a coroutine of its own
(the engine's), keeping its slot. Once the run halts, no more are handed over.

Before taking more slots, the feeder waits while the store's writer is more than ``MAX_BACKLOG``
rows behind: rows and events not written yet stay bounded, as a slow client bounds a Pipe
stream's answers. What was handed over before the stage's tasks start (its plan, and a resumed
stage's rows) does not count: as many as the stage's tasks, held in memory anyway; counted, a
pending row per task made a stage of more than ``MAX_BACKLOG`` tasks wait for its whole plan to
be committed before its first task ran (a 10,000-task map waited 70-100 ms in all; under 1 ms
since).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import structlog

from ether_host.agents import Dispatcher, TaskEvent, TaskInput, TaskResult
from ether_host.errors import EtherError
from ether_host.workflows.model import TaskRecord
from ether_host.workflows.store import RunStore
from ether_host.workflows.writes import PendingWrites

log = structlog.get_logger("ether.workflows")

FEED = 1000  # tasks handed to the dispatcher at a time (a Pipe request's most inputs)
MAX_STAGE_CONCURRENCY = 10_000  # spec.py's bound on max_concurrency
MAX_BACKLOG = 10_000  # rows the store's writer may be behind by before the stage waits
BACKLOG_POLL = 0.005  # seconds between looks at the backlog meanwhile


@dataclass(frozen=True, slots=True)
class StageCalls:
    """What the engine does around each task of the stage's batches."""

    # Count the attempt and say what to run; None: it may not start (the run halted).
    first_attempt: Callable[[TaskRecord], TaskInput | None]
    on_event: Callable[[TaskRecord, TaskEvent], None]  # started, progress, log
    # The first attempt's outcome: True when the task is done, False when it runs again.
    ended: Callable[[TaskRecord, TaskResult | EtherError], bool]
    after: Callable[[TaskRecord], None]  # a task done with, or never started: settle, follow
    halted: Callable[[], bool]


async def run_stage_tasks(
    todo: list[TaskRecord],
    slots: asyncio.Semaphore,
    dispatcher: Dispatcher,
    calls: StageCalls,
    store: RunStore,
    writes: PendingWrites,
) -> None:
    """Run each of ``todo`` in batches within the stage's ``slots``; returns once every task handed
    over was answered (retries, in the engine's coroutines, may still run)."""
    writes.flush()
    planned = store.handed_over()
    waited = False  # the log says once per stage that it waited (a slow disk, a locked file)
    async with asyncio.TaskGroup() as tg:
        at = 0
        while at < len(todo) and not calls.halted():
            while store.backlog(after=planned) > MAX_BACKLOG:
                if not waited:
                    waited = True
                    log.info(
                        "stage waits for the run store",
                        run_id=writes.run_id,
                        stage=todo[at].stage,
                        rows_behind=store.backlog(after=planned),
                        max_backlog=MAX_BACKLOG,
                    )
                writes.flush()
                await anyio.sleep(BACKLOG_POLL)
            await slots.acquire()
            batch = [todo[at]]
            at += 1
            while at < len(todo) and len(batch) < FEED and not slots.locked():
                await slots.acquire()  # free: returns at once
                batch.append(todo[at])
                at += 1
            _start(batch, slots, dispatcher, calls, tg)


def _start(
    batch: list[TaskRecord],
    slots: asyncio.Semaphore,
    dispatcher: Dispatcher,
    calls: StageCalls,
    tg: asyncio.TaskGroup,
) -> None:
    tasks: list[TaskRecord] = []
    inputs: list[TaskInput] = []
    for task in batch:
        task_input = calls.first_attempt(task)
        if task_input is None:
            slots.release()
            calls.after(task)
            continue
        tasks.append(task)
        inputs.append(task_input)
    if not inputs:
        return

    def answer(index: int, outcome: TaskResult | EtherError) -> None:
        # Called from the link's read callback (or a CancelTask): nothing may escape it, and the
        # slot must come back whatever the engine did.
        task = tasks[index]
        done = True
        try:
            done = calls.ended(task, outcome)
        except Exception:
            log.exception("recording a task's end failed", task_id=task.task_id)
        if not done:
            return
        slots.release()
        try:
            calls.after(task)
        except Exception:
            log.exception("settling a task failed", task_id=task.task_id)

    def on_event(index: int, event: TaskEvent) -> None:
        calls.on_event(tasks[index], event)

    tg.create_task(dispatcher.execute_batch(inputs, answer, on_event), name="stage batch")
