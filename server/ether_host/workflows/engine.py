"""Execute one run: stages in order, tasks under concurrency caps, budgets, policies, retries.

``RunExecution`` is made of its parts: the run and its stages here, its tasks' attempts
(``engine_tasks.py``), over the state, recording and halting they share (``engine_state.py``).

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
import time
from typing import Any

import anyio
import structlog

from ether_host.telemetry import optional_span, set_error
from ether_host.workflows import budgets
from ether_host.workflows.engine_state import BUDGET, CANCELLED, FAILED, INTERRUPTED, Halt, StageRun
from ether_host.workflows.engine_tasks import TaskAttempts
from ether_host.workflows.model import Problem, RunState, StageRecord, StageState, TaskState
from ether_host.workflows.spec import STOP, StageSpec
from ether_host.workflows.stage_pipe import StageCalls, run_stage_tasks
from ether_host.workflows.stages import InputError, new_task

log = structlog.get_logger("ether.workflows")

# CANCELLED and INTERRUPTED are read from here (runs.py, run_control.py), as before the split.
__all__ = ["CANCELLED", "INTERRUPTED", "RunExecution"]


class RunExecution(TaskAttempts):
    """Runs (or resumes) one run to its end and records everything it does."""

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
        stage = StageRun(spec, record, asyncio.Semaphore(concurrency))
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

    def _end_stage(self, stage: StageRun) -> None:
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
