"""A stage's tasks through the dispatcher's batch path (``Dispatcher.execute_batch``, what a
batched ``AgentIOService.Pipe`` stream runs on), with the run store as the stage's slow reader.

Every task of the stage holds one of the stage's slots while it runs (followed next actions
too): the feeder takes the slots that are free, up to ``FEED`` at a time, and hands their tasks
to the dispatcher as one batch; each task's first attempt is then sent without a coroutine of its
own, its events and its end come back through callbacks (``StageCalls``), and its slot frees as
it ends. A task that runs again (the stage's retry policy) goes on in a coroutine of its own
(the engine's), keeping its slot. Once the run halts, no more are handed over.

A task that succeeded frees its slot at once and is recorded a little later (``_Succeeded``),
after the tasks its slot lets in were sent: recording a task (its row, its events and their
JSON) costs the event loop more than sending one, and recorded first, the answers the agent gave
in one read held back the next tasks until every one of them was recorded, with the agent idle
meanwhile (bench/RESULTS.md, "Batching"). What the run shows keeps its order: each task's start
is recorded after every success before it, and a failure, a retry or a stage with a budget
(whose next task's start depends on what the last one spent) is recorded at once, after those
waiting.

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

from ether_host.agents import SUCCESS, Dispatcher, TaskEvent, TaskInput, TaskResult
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
    # A success may be recorded after its slot went to the next task: no budget of the stage
    # or run depends on what it spent.
    successes_later: bool = False


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
    succeeded = _Succeeded(calls, asyncio.get_running_loop())
    waited = False  # the log says once per stage that it waited (a slow disk, a locked file)
    try:
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
                _start(batch, slots, dispatcher, calls, tg, succeeded)
    finally:
        succeeded.record()


class _Succeeded:
    """Tasks that succeeded, their slots given back, waiting to be recorded (in the order they
    ended): recorded before anything else of the stage is (another task's start, progress or
    end), or two turns of the loop after the first came, whichever is first.

    Two turns: the answers come in the link's read callback (turn 0), which wakes the feeder;
    the feeder runs in turn 1 and starts a batch, whose step comes in turn 2, sends its frames
    and then tells the tasks' starts (agents/batch.py), recording these first. The fallback
    scheduled from turn 0 through turn 1 runs after that step (the loop's queue is FIFO), so it
    finds nothing left when a batch came; it records them when none did (the stage's last
    tasks). The order only decides how soon the agent gets more work, never what is recorded."""

    __slots__ = ("_calls", "_loop", "_tasks")

    def __init__(self, calls: StageCalls, loop: asyncio.AbstractEventLoop) -> None:
        self._calls = calls
        self._loop = loop
        self._tasks: list[tuple[TaskRecord, TaskResult]] = []

    def add(self, task: TaskRecord, result: TaskResult) -> None:
        self._tasks.append((task, result))
        if len(self._tasks) == 1:
            self._loop.call_soon(self._loop.call_soon, self.record)

    def record(self) -> None:
        """Record every task waiting, now (nothing escapes: a callback of the loop's)."""
        if not self._tasks:
            return
        tasks, self._tasks = self._tasks, []
        calls = self._calls
        for task, result in tasks:
            try:
                calls.ended(task, result)  # a success: done with, never run again
            except Exception:
                log.exception("recording a task's end failed", task_id=task.task_id)
            try:
                calls.after(task)
            except Exception:
                log.exception("settling a task failed", task_id=task.task_id)


def _start(
    batch: list[TaskRecord],
    slots: asyncio.Semaphore,
    dispatcher: Dispatcher,
    calls: StageCalls,
    tg: asyncio.TaskGroup,
    succeeded: _Succeeded,
) -> None:
    tasks: list[TaskRecord] = []
    inputs: list[TaskInput] = []
    for task in batch:
        task_input = calls.first_attempt(task)
        if task_input is None:
            slots.release()
            succeeded.record()
            calls.after(task)
            continue
        tasks.append(task)
        inputs.append(task_input)
    if not inputs:
        return
    later = calls.successes_later

    def answer(index: int, outcome: TaskResult | EtherError) -> None:
        # Called from the link's read callback (or a CancelTask): nothing may escape it, and the
        # slot must come back whatever the engine did.
        task = tasks[index]
        if later and isinstance(outcome, TaskResult) and outcome.status == SUCCESS:
            slots.release()
            succeeded.add(task, outcome)
            return
        succeeded.record()
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
        succeeded.record()
        calls.on_event(tasks[index], event)

    tg.create_task(dispatcher.execute_batch(inputs, answer, on_event), name="stage batch")
