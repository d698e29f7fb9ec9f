"""Execute one run: stages in order, tasks under concurrency caps, budgets, policies, retries.

A stage's tasks run through the dispatcher's batch path (``Dispatcher.execute_batch``, what a
batched ``AgentIOService.Pipe`` stream runs on; stage_pipe.py): the stage's concurrency is its
window of slots, a task's first attempt has no coroutine of its own, and each task's events and
end are recorded from callbacks; the run's task rows and events go to the store in batches
(writes.py). A retry, or a followed next action, runs in a coroutine of its own.

A run halts for one of four reasons: CancelRun, an exhausted budget, a failed
task under a STOP policy, or the host stopping. Halting is the same every
time: no new task starts, every running task gets a cancel frame (through
the dispatcher, with the reason), tasks waiting for a slot or a retry are
dropped, and the run ends in the state the reason implies.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog

from ether_host.agents import SUCCESS, Budget, Dispatcher, TaskEvent, TaskInput, TaskResult
from ether_host.errors import Cancelled, EtherError, NotFound
from ether_host.supervisor import Supervisor
from ether_host.telemetry import Link, optional_span, set_error
from ether_host.workflows import budgets, retries
from ether_host.workflows.events import EventLog, detail_body
from ether_host.workflows.model import (
    Problem,
    RunEvent,
    RunRecord,
    RunState,
    StageRecord,
    StageState,
    TaskRecord,
    TaskState,
    encoded,
    error_result,
)
from ether_host.workflows.spec import STOP, RetrySpec, StageSpec
from ether_host.workflows.stage_pipe import StageCalls, run_stage_tasks
from ether_host.workflows.stages import InputError, StageInputs, new_task, proposed_tasks
from ether_host.workflows.store import RunStore
from ether_host.workflows.writes import PendingWrites

log = structlog.get_logger("ether.workflows")

PROGRESS_EVERY = 0.1  # seconds between stage_progress events of one stage
CANCELLED, BUDGET, FAILED, INTERRUPTED = "cancelled", "budget", "failed", "interrupted"


@dataclass
class Halt:
    """Why a run stopped early."""

    kind: str  # CANCELLED | BUDGET | FAILED | INTERRUPTED
    code: str
    message: str


@dataclass
class _Stage:
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


class RunExecution:
    """Runs (or resumes) one run to its end and records everything it does."""

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

    # -- the run -------------------------------------------------------------------------

    async def execute(self) -> None:
        """Run the run, inside its span when traced: the root of a trace of its own (a run
        outlives the call that started it), linked to that call's span."""
        record = self.record
        attributes = {"ether.workflow": record.spec.name, "ether.run_id": record.id}
        name = f"ether.workflow.run {record.spec.name}"
        with optional_span(
            self.dispatcher.tracing, name, attributes, links=self.trace_links
        ) as span:
            await self._execute()
            if span is not None:
                span.set_attribute("ether.state", record.state)
                if record.state not in (RunState.SUCCEEDED, RunState.PARTIAL):
                    set_error(span, f"{record.state}: {self.halt.message if self.halt else ''}")

    async def _execute(self) -> None:
        record = self.record
        try:
            record.state = RunState.RUNNING
            record.started_at = record.started_at or time.time()
            record.usage.start()
            budget = record.spec.budget
            if budget.max_time is not None:
                self._deadline = time.monotonic() + max(
                    0.0, budget.max_time - record.usage.elapsed_before
                )
            if self.resumed is not None:
                self.emit("run_resumed", self.resumed)
                for task in self.failed_on_resume:
                    self.emit("task_completed", {"task": task.api()})
            else:
                self.emit("run_started", {})
            self.save_run()
            async with anyio.create_task_group() as timers:
                if budget.max_time is not None:
                    timers.start_soon(
                        self._timer, self._deadline, f"run budget max_time={budget.max_time:g}s"
                    )
                for index, spec in enumerate(record.spec.stages):
                    await self._traced_stage(index, spec)
                timers.cancel_scope.cancel()
        except BaseException:
            if self.halt is None:
                self.halt = Halt(
                    INTERRUPTED, "interrupted", "the run's execution was cut short by the host"
                )
            raise
        finally:
            self._finish()

    async def _timer(self, deadline: float, what: str) -> None:
        await anyio.sleep(max(0.0, deadline - time.monotonic()))
        self.stop(BUDGET, "budget_exceeded", f"{what} used up")

    def _finish(self) -> None:
        record = self.record
        record.usage.stop()
        halt = self.halt
        if halt is None:
            partial = [s.name for s in record.stages if s.state == StageState.PARTIAL]
            if partial:
                record.state = RunState.PARTIAL
                record.error = Problem(
                    "tasks_failed",
                    f"{record.counts.failed} task(s) failed in stage(s) "
                    f"{', '.join(partial)} (policy CONTINUE)",
                )
            else:
                record.state = RunState.SUCCEEDED
        elif halt.kind == BUDGET:
            record.state = RunState.PARTIAL if record.counts.succeeded else RunState.FAILED
            record.error = Problem(halt.code, halt.message)
        else:
            record.state = {
                CANCELLED: RunState.CANCELLED,
                FAILED: RunState.FAILED,
                INTERRUPTED: RunState.INTERRUPTED,
            }[halt.kind]
            record.error = Problem(halt.code, halt.message)
        if record.state in (RunState.SUCCEEDED, RunState.PARTIAL):
            ran = [
                s for s in record.stages if s.state in (StageState.SUCCEEDED, StageState.PARTIAL)
            ]
            if ran:
                record.result = self.inputs.data(ran[-1].name)
                record.has_result = True
        record.ended_at = time.time()
        body: dict[str, Any] = {
            "state": f"RUN_STATE_{record.state}",
            "usage": record.usage.api(),
            "tasks": record.counts.api(),
        }
        if record.error is not None:
            body["error"] = record.error.api()
        self.emit("run_completed", body)
        self.save_run()
        self.events.close()
        self.done.set()
        log.info(
            "run ended",
            run_id=record.id,
            state=record.state,
            tasks=record.counts.total,
            elapsed_s=round(record.usage.elapsed, 3),
            cost=record.usage.cost,
        )

    # -- stages --------------------------------------------------------------------------

    async def _traced_stage(self, index: int, spec: StageSpec) -> None:
        """A stage inside its span when traced: its tasks' spans are the span's children."""
        tracing = self.dispatcher.tracing
        if tracing is None:
            await self._stage(index, spec)
            return
        record = self.record.stages[index]
        name = f"ether.workflow.stage {spec.name}"
        with tracing.span(name, {"ether.stage": spec.name, "ether.run_id": self.record.id}) as span:
            await self._stage(index, spec)
            span.set_attribute("ether.state", record.state)
            if record.state in (StageState.FAILED, StageState.CANCELLED):
                set_error(span, f"{record.state}: {record.error.message if record.error else ''}")

    async def _stage(self, index: int, spec: StageSpec) -> None:
        record = self.record.stages[index]
        if record.state in StageState.DONE:
            return
        if self.halt is not None:
            self._close_stage(
                record,
                StageState.CANCELLED,
                Problem(self.halt.code, f"not run: {self.halt.message}"),
            )
            return
        if not record.tasks:
            if not self.inputs.when(spec):
                assert spec.when is not None
                self._close_stage(
                    record,
                    StageState.SKIPPED,
                    Problem("skipped", f"when {spec.when.text!r} was false"),
                )
                return
            try:
                planned, fanned = self.inputs.expand(spec)
            except InputError as error:
                self._close_stage(record, StageState.FAILED, Problem("invalid_input", str(error)))
                self.stop(FAILED, "invalid_input", f"stage {spec.name!r}: {error}")
                return
            self.fanned[spec.name] = fanned
            for input_index, action_index, agent, action, params in planned:
                task = new_task(
                    self.record, spec.name, input_index, action_index, agent, action, params
                )
                record.tasks.append(task)
                self._move(record, task, TaskState.PENDING, new=True, save=False)
            # Stored as the stage's plan, not a row per task (writes.py): a resume after a
            # kill -9 reads it back as the stage's pending tasks.
            self.writes.plan(record.tasks)
        concurrency = spec.concurrency(self.record.spec.max_concurrency)
        stage = _Stage(spec, record, asyncio.Semaphore(concurrency))
        stage.limited = budgets.limited(self.record, spec)
        stage.followed = sum(1 for t in record.tasks if t.proposed_by)
        record.state = StageState.RUNNING
        record.started_at = record.started_at or time.time()
        record.usage.start()
        stage.deadline = self._deadline
        if spec.budget.max_time is not None:
            own = time.monotonic() + max(0.0, spec.budget.max_time - record.usage.elapsed_before)
            stage.deadline = min(stage.deadline, own)
        self.emit("stage_started", {"stage": spec.name, "tasks": record.counts.total})
        self.save_run()
        async with anyio.create_task_group() as timers:
            if spec.budget.max_time is not None:
                timers.start_soon(
                    self._timer,
                    stage.deadline,
                    f"stage {spec.name!r} budget max_time={spec.budget.max_time:g}s",
                )
            async with anyio.create_task_group() as group:
                stage.group = group  # where retries and followed next actions run
                await run_stage_tasks(
                    [t for t in record.tasks if t.state not in TaskState.FINISHED],
                    stage.slots,
                    self.dispatcher,
                    StageCalls(
                        lambda task: self._first_attempt(stage, task),
                        lambda task, event: self._on_event(stage, task, event),
                        lambda task, outcome: self._first_ended(stage, task, outcome),
                        lambda task: self._after(stage, task),
                        self.halted,
                        successes_later=not stage.limited,
                    ),
                    self.store,
                    self.writes,
                )
            timers.cancel_scope.cancel()
        for task in record.tasks:
            if task.state not in TaskState.FINISHED:
                self._settle(stage, task)
        if not self.halted() and spec.on_failure == STOP and record.counts.failed:
            failed = next(t for t in record.tasks if t.state == TaskState.FAILED)
            self.stop(FAILED, "stage_failed", f"stage {spec.name!r}: task {failed.task_id} failed")
        self._end_stage(stage)
        # Checked once the stage has ended, not as its last task does: a stage whose tasks all
        # ran within the run's max_cost ends as they did, and the run stops before the next.
        reason = budgets.run_cost_used_up(self.record, index)
        if reason is not None:
            self.stop(BUDGET, "budget_exceeded", reason)

    def _end_stage(self, stage: _Stage) -> None:
        record, halt = stage.record, self.halt
        if halt is None:
            failed = record.counts.failed
            state = StageState.PARTIAL if failed else StageState.SUCCEEDED
            error = (
                Problem("tasks_failed", f"{failed} of {record.counts.total} task(s) failed")
                if failed
                else None
            )
        elif halt.kind in (CANCELLED, INTERRUPTED):
            state, error = StageState.CANCELLED, Problem(halt.code, halt.message)
        else:
            state, error = StageState.FAILED, Problem(halt.code, halt.message)
        self._close_stage(record, state, error)

    def _close_stage(self, record: StageRecord, state: str, error: Problem | None) -> None:
        record.usage.stop()
        record.state = state
        record.error = error
        if state != StageState.CANCELLED or record.started_at is not None:
            record.ended_at = time.time()
        body: dict[str, Any] = {
            "stage": record.name,
            "state": f"STAGE_STATE_{state}",
            "tasks": record.counts.api(),
            "usage": record.usage.api(),
        }
        if error is not None:
            body["error"] = error.api()
        self.emit("stage_completed", body)
        self.save_run()

    def _settle(self, stage: _Stage, task: TaskRecord) -> None:
        """A task that will not run (further): cancelled, or left pending for a resume."""
        if self.halt is not None and self.halt.kind == INTERRUPTED:
            if task.state != TaskState.PENDING:
                self._move(stage.record, task, TaskState.PENDING)
            return
        started = task.attempts > 0
        task.ended_at = time.time() if started else None
        self._move(stage.record, task, TaskState.CANCELLED)
        if started:
            self.emit("task_completed", {"task": task.api()})

    # -- tasks ---------------------------------------------------------------------------

    def _first_attempt(self, stage: _Stage, task: TaskRecord) -> TaskInput | None:
        """A task of the stage's batches, about to be handed to the dispatcher with its slot:
        counted against the budgets; None when it may not start."""
        if self.halted() or not self._charge(stage):
            return None
        task.attempts += 1
        self._active[task.task_id] = task
        return self._task_input(stage, task)

    def _first_ended(
        self, stage: _Stage, task: TaskRecord, outcome: TaskResult | EtherError
    ) -> bool:
        """The first attempt of a task of the stage's batches ended: True when the task is done
        with; False when it runs again, in a coroutine of its own that keeps its slot."""
        delay = self._judge(stage, task, self._result_of(task, outcome))
        if delay is None:
            self._active.pop(task.task_id, None)
            return True
        assert stage.group is not None
        stage.group.start_soon(self._retry, stage, task, delay)
        return False

    async def _retry(self, stage: _Stage, task: TaskRecord, delay: float) -> None:
        """The attempts after the first of a task of the stage's batches (its slot held)."""
        try:
            with anyio.CancelScope() as scope:
                task.scope = scope
                if not self.halted():  # stop() may have come before this scope existed
                    await anyio.sleep(delay)
                    await self._attempts(stage, task)
        finally:
            task.scope = None
            self._active.pop(task.task_id, None)
            stage.slots.release()
        self._after(stage, task)

    async def _run_task(self, stage: _Stage, task: TaskRecord) -> None:
        """A followed next action: a task of its own in the stage's task group."""
        self._active[task.task_id] = task
        try:
            with anyio.CancelScope() as scope:
                task.scope = scope
                async with stage.slots:
                    if not self.halted():
                        await self._attempts(stage, task)
        finally:
            task.scope = None
            self._active.pop(task.task_id, None)
        self._after(stage, task)

    def _after(self, stage: _Stage, task: TaskRecord) -> None:
        """A task that ran or will not run: settled, or its next actions followed."""
        if task.state not in TaskState.FINISHED:
            self._settle(stage, task)
        elif stage.spec.follow is not None and task.result is not None and not self.halted():
            self._follow(stage, task)

    async def _attempts(self, stage: _Stage, task: TaskRecord) -> None:
        """A task's attempts in a coroutine of its own, until one is the last (_judge)."""
        while not self.halted():
            if not self._charge(stage):
                return
            task.attempts += 1
            try:
                outcome: TaskResult | EtherError = await self.dispatcher.execute(
                    self._task_input(stage, task),
                    lambda event: self._on_event(stage, task, event),
                )
            except EtherError as error:
                outcome = error
            delay = self._judge(stage, task, self._result_of(task, outcome))
            if delay is None:
                return
            await anyio.sleep(delay)

    def _judge(self, stage: _Stage, task: TaskRecord, result: TaskResult) -> float | None:
        """Record what an attempt of ``task`` gave, and halt the run when that calls for it;
        the pause before the next attempt, or None when this was the last."""
        spec = stage.spec
        budgets.spend(self.record, stage.record, result.metadata.cost)
        if result.status == SUCCESS:
            self._complete(stage, task, result, TaskState.SUCCEEDED)
            self._check_cost(stage)
            return None
        code = result.error.code if result.error is not None else ""
        if self.halted() or code == "cancelled":
            task.result = result
            return None  # settled as cancelled (or pending, for a resume) by the caller
        if (
            code in ("task_deadline_exceeded", "deadline_waiting_for_agent")
            and time.monotonic() >= stage.deadline
        ):
            task.result = result
            self.stop(BUDGET, "budget_exceeded", self._time_budget_message(stage))
            return None
        if code == "budget_exceeded":
            self._complete(stage, task, result, TaskState.FAILED)
            self.stop(
                BUDGET,
                "budget_exceeded",
                f"task {task.task_id} went over what was left of the budget: "
                f"{result.error.message if result.error else ''}",
            )
            return None
        retry = spec.retry or self.record.spec.default_retry or RetrySpec()
        # Asked only when a task fails (most never do).
        idempotent = retries.idempotent(self.supervisor, task, self.dispatcher.other_hosts)
        attempts = retry.max_attempts if idempotent else 1
        if task.attempts < attempts and retries.retryable(result, retry):
            self._complete(stage, task, result, TaskState.RETRYING)
            return retry.delay(task.attempts)
        self._complete(stage, task, result, TaskState.FAILED)
        self._check_cost(stage)
        if spec.on_failure == STOP:
            error = result.error
            detail = (
                f"{error.code}: {error.message}" if error is not None else f"status {result.status}"
            )
            self.stop(
                FAILED,
                "stage_failed",
                f"stage {spec.name!r}: task {task.task_id} "
                f"({task.agent}.{task.action}) failed: {detail}",
            )
        return None

    def _time_budget_message(self, stage: _Stage) -> str:
        if stage.deadline < self._deadline and stage.spec.budget.max_time is not None:
            return (
                f"stage {stage.spec.name!r} budget max_time={stage.spec.budget.max_time:g}s used up"
            )
        return f"run budget max_time={self.record.spec.budget.max_time or 0:g}s used up"

    def _charge(self, stage: _Stage) -> bool:
        """Count a task start against max_tasks (and refuse it once max_cost is spent)."""
        if not stage.limited:
            self.record.usage.tasks += 1
            stage.record.usage.tasks += 1
            return True
        refusal = budgets.charge_start(self.record, stage.spec, stage.record)
        if refusal is not None:
            self.stop(BUDGET, "budget_exceeded", refusal)
        return refusal is None

    def _check_cost(self, stage: _Stage) -> None:
        """Halt once a max_cost is spent and tasks of the stage remain (pending or running)."""
        if not stage.limited:
            return
        reason = budgets.cost_used_up(self.record, stage.spec, stage.record)
        if reason is not None:
            self.stop(BUDGET, "budget_exceeded", reason)

    def _task_input(self, stage: _Stage, task: TaskRecord) -> TaskInput:
        deadline = stage.deadline
        if stage.spec.task_timeout is not None:
            deadline = min(deadline, time.monotonic() + stage.spec.task_timeout)
        return TaskInput(
            agent=task.agent,
            action=task.action,
            params=task.params,
            task_id=task.task_id,
            budget=(
                budgets.task_budget(self.record, stage.spec, stage.record)
                if stage.limited
                else Budget()
            ),
            workflow=self.record.id,
            deadline=None if deadline == math.inf else deadline,
        )

    @staticmethod
    def _result_of(task: TaskRecord, outcome: TaskResult | EtherError) -> TaskResult:
        """An attempt's result; an error the dispatcher raised as the failed result it means."""
        if isinstance(outcome, TaskResult):
            return outcome
        if isinstance(outcome, Cancelled):
            return error_result(task.task_id, task.agent, task.action, "cancelled", outcome.message)
        return error_result(
            task.task_id,
            task.agent,
            task.action,
            outcome.reason.lower(),
            outcome.message,
            retryable=outcome.code.value in retries.RETRYABLE_CODES,
        )

    def _on_event(self, stage: _Stage, task: TaskRecord, event: TaskEvent) -> None:
        if task.task_id not in self._active or self.events.closed:
            return  # a log or progress frame of an abandoned attempt, after the task was settled
        if event.kind == "started" and self.halt is not None:
            # Handed to the dispatcher before the halt, and not held by it when stop() ran.
            with contextlib.suppress(NotFound):
                self.dispatcher.cancel(task.task_id, self.halt.message)
            if task.task_id not in self._active:
                return  # cancelled and settled at once
        if event.kind == "started":
            task.started_at = task.started_at or event.time
            if task.state != TaskState.RUNNING:
                self._move(stage.record, task, TaskState.RUNNING)
            self.emit("task_started", encoded({"task": task.api(with_output=False)}))
            return
        self.emit("task_progress", detail_body(task.task_id, task.stage, event.kind, event.payload))

    def _complete(self, stage: _Stage, task: TaskRecord, result: TaskResult, state: str) -> None:
        task.result = result
        if state in TaskState.FINISHED:
            task.ended_at = time.time()
        self._move(stage.record, task, state, save=False)
        # Built and encoded once: the event's task and the task's row.
        self.emit("task_completed", self.writes.task_completed(task, task.api()))
        now = time.monotonic()
        if now - stage.last_progress >= PROGRESS_EVERY:
            stage.last_progress = now
            self.emit(
                "stage_progress",
                {
                    "stage": stage.spec.name,
                    "tasks": stage.record.counts.api(),
                    "usage": stage.record.usage.api(),
                },
            )

    def _follow(self, stage: _Stage, task: TaskRecord) -> None:
        """Run the next actions the task proposed, within the stage's bounds."""
        assert stage.group is not None
        for child in proposed_tasks(self.record, stage.spec, task, stage.followed):
            stage.followed += 1
            stage.record.tasks.append(child)
            self._move(stage.record, child, TaskState.PENDING, new=True)
            stage.group.start_soon(self._run_task, stage, child)
