"""A run's tasks (``TaskAttempts``, a part of ``RunExecution``): a task's first attempt in its
stage's batches, its retries and the next actions it proposed in coroutines of their own, what each
attempt gave (success, a retry, failure, a budget used up), the budgets charged, and a task that
will not run settled. Apart from engine.py, which runs the stages these tasks are of."""

from __future__ import annotations

import contextlib
import math
import time

import anyio

from ether_host.agents import SUCCESS, Budget, TaskEvent, TaskInput, TaskResult
from ether_host.errors import Cancelled, EtherError, NotFound
from ether_host.workflows import budgets, retries
from ether_host.workflows.engine_state import BUDGET, FAILED, INTERRUPTED, ExecutionState, StageRun
from ether_host.workflows.events import detail_body
from ether_host.workflows.model import TaskRecord, TaskState, encoded, error_result
from ether_host.workflows.spec import STOP, RetrySpec
from ether_host.workflows.stages import proposed_tasks

PROGRESS_EVERY = 0.1  # seconds between stage_progress events of one stage


class TaskAttempts(ExecutionState):
    """A run's tasks: their attempts, retries and followed next actions, and how each ends."""

    # -- tasks ---------------------------------------------------------------------------

    def _first_attempt(self, stage: StageRun, task: TaskRecord) -> TaskInput | None:
        """A task of the stage's batches, about to be handed to the dispatcher with its slot:
        counted against the budgets; None when it may not start."""
        if self.halted() or not self._charge(stage):
            return None
        task.attempts += 1
        self._active[task.task_id] = task
        return self._task_input(stage, task)

    def _first_ended(
        self, stage: StageRun, task: TaskRecord, outcome: TaskResult | EtherError
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

    async def _retry(self, stage: StageRun, task: TaskRecord, delay: float) -> None:
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

    async def _run_task(self, stage: StageRun, task: TaskRecord) -> None:
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

    def _after(self, stage: StageRun, task: TaskRecord) -> None:
        """A task that ran or will not run: settled, or its next actions followed."""
        if task.state not in TaskState.FINISHED:
            self._settle(stage, task)
        elif stage.spec.follow is not None and task.result is not None and not self.halted():
            self._follow(stage, task)

    def _settle(self, stage: StageRun, task: TaskRecord) -> None:
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

    async def _attempts(self, stage: StageRun, task: TaskRecord) -> None:
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

    def _judge(self, stage: StageRun, task: TaskRecord, result: TaskResult) -> float | None:
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

    def _time_budget_message(self, stage: StageRun) -> str:
        if stage.deadline < self._deadline and stage.spec.budget.max_time is not None:
            return (
                f"stage {stage.spec.name!r} budget max_time={stage.spec.budget.max_time:g}s used up"
            )
        return f"run budget max_time={self.record.spec.budget.max_time or 0:g}s used up"

    def _charge(self, stage: StageRun) -> bool:
        """Count a task start against max_tasks (and refuse it once max_cost is spent)."""
        if not stage.limited:
            self.record.usage.tasks += 1
            stage.record.usage.tasks += 1
            return True
        refusal = budgets.charge_start(self.record, stage.spec, stage.record)
        if refusal is not None:
            self.stop(BUDGET, "budget_exceeded", refusal)
        return refusal is None

    def _check_cost(self, stage: StageRun) -> None:
        """Halt once a max_cost is spent and tasks of the stage remain (pending or running)."""
        if not stage.limited:
            return
        reason = budgets.cost_used_up(self.record, stage.spec, stage.record)
        if reason is not None:
            self.stop(BUDGET, "budget_exceeded", reason)

    def _task_input(self, stage: StageRun, task: TaskRecord) -> TaskInput:
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

    def _on_event(self, stage: StageRun, task: TaskRecord, event: TaskEvent) -> None:
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

    def _complete(self, stage: StageRun, task: TaskRecord, result: TaskResult, state: str) -> None:
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

    def _follow(self, stage: StageRun, task: TaskRecord) -> None:
        """Run the next actions the task proposed, within the stage's bounds."""
        assert stage.group is not None
        for child in proposed_tasks(self.record, stage.spec, task, stage.followed):
            stage.followed += 1
            stage.record.tasks.append(child)
            self._move(stage.record, child, TaskState.PENDING, new=True)
            stage.group.start_soon(self._run_task, stage, child)
