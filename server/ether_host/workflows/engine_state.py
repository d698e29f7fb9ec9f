"""What the parts of one run's execution share (``ExecutionState``): the run's record, the
store, dispatcher and supervisor it works with, its tasks under way; recording (a task's move from
state to state, the run's events and row) and halting (``stop``, and why: ``Halt``), which every
part does; a stage while it runs (``StageRun``). Apart so that the run and its stages (engine.py,
``RunExecution``) and its tasks' attempts (engine_tasks.py, ``TaskAttempts``) each read on their
own over it; engine.py's docstring says when and how a run halts."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog

from ether_host.agents import Dispatcher
from ether_host.errors import NotFound
from ether_host.supervisor import Supervisor
from ether_host.telemetry import Link
from ether_host.workflows.events import EventLog
from ether_host.workflows.model import RunEvent, RunRecord, StageRecord, TaskRecord, TaskState
from ether_host.workflows.spec import StageSpec
from ether_host.workflows.stages import StageInputs
from ether_host.workflows.store import RunStore
from ether_host.workflows.writes import PendingWrites

log = structlog.get_logger("ether.workflows")

CANCELLED, BUDGET, FAILED, INTERRUPTED = "cancelled", "budget", "failed", "interrupted"


@dataclass
class Halt:
    """Why a run stopped early."""

    kind: str  # CANCELLED | BUDGET | FAILED | INTERRUPTED
    code: str
    message: str


@dataclass
class StageRun:
    """A stage while it runs."""

    spec: StageSpec
    record: StageRecord
    # Held by every task of the stage while it runs, retries and followed next actions
    # included. asyncio's: taken once per task.
    slots: asyncio.Semaphore
    deadline: float = math.inf
    limited: bool = True  # a budget limits cost, tasks or iterations (budgets.limited)
    group: anyio.abc.TaskGroup | None = None
    last_progress: float = 0.0
    followed: int = 0
    waiting: set[str] = field(default_factory=set)


class ExecutionState:
    """One run's execution as its parts share it: its state, what it records, how it halts."""

    def __init__(
        self,
        record: RunRecord,
        store: RunStore,
        dispatcher: Dispatcher,
        supervisor: Supervisor,
        fanned: dict[str, bool],
        *,
        resumed: dict[str, int] | None = None,
    ) -> None:
        self.record = record
        self.store = store
        self.dispatcher = dispatcher
        self.supervisor = supervisor
        self.fanned = fanned
        self.resumed = resumed
        self.writes = PendingWrites(record.id, store)
        self.events = EventLog(record.id, store, record.last_sequence, self.writes)
        self.done = anyio.Event()
        self.halt: Halt | None = None
        self.inputs = StageInputs(record, fanned)
        self._active: dict[str, TaskRecord] = {}
        self._deadline = math.inf
        # The RPC that started (or resumed) the run, linked from the run's span when traced.
        self.trace_links: list[Link] = []
        self.failed_on_resume: list[
            TaskRecord
        ] = []  # unfinished non-idempotent tasks a resume gave up

    # -- recording -----------------------------------------------------------------------

    def emit(self, kind: str, body: dict[str, Any] | bytes) -> None:
        self.record.last_sequence += 1
        self.events.append(RunEvent(self.record.last_sequence, time.time(), kind, body))

    def save_run(self) -> None:
        """The run's row, after every task row and event waiting for a batch."""
        self.writes.flush()
        self.store.put_run({**self.record.stored(), "fanned": self.fanned})

    def save_task(self, task: TaskRecord) -> None:
        self.writes.task(task)

    def _move(
        self,
        stage: StageRecord,
        task: TaskRecord,
        state: str,
        *,
        new: bool = False,
        save: bool = True,
    ) -> None:
        old = None if new else task.state
        task.state = state
        stage.counts.move(old, state)
        self.record.counts.move(old, state)
        if save:
            self.save_task(task)

    # -- control -------------------------------------------------------------------------

    def stop(self, kind: str, code: str, message: str) -> None:
        """Halt the run (the first reason wins): cancel running tasks, start no more."""
        if self.halt is not None or self.done.is_set():
            return
        self.halt = Halt(kind, code, message)
        log.info("run halting", run_id=self.record.id, kind=kind, code=code, message=message)
        for task in list(self._active.values()):
            if task.scope is None:  # in a batch of the stage (stage_pipe.py)
                # Running, or waiting for a slot on the agent: a cancel frame if sent. One the
                # dispatcher does not hold yet is cancelled as it starts (_on_event).
                with contextlib.suppress(NotFound):
                    self.dispatcher.cancel(task.task_id, message)
                continue
            if task.state == TaskState.RUNNING:
                with contextlib.suppress(NotFound):
                    self.dispatcher.cancel(task.task_id, message)
            if task.scope is not None:
                task.scope.cancel()

    def halted(self) -> bool:
        return self.halt is not None
