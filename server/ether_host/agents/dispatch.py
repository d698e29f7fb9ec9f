"""Run tasks on agents: slots, deadlines, cancellation, budgets, retries.

A task waits for a slot on the least-loaded running replica, is sent as a
``task`` frame and waits for its ``result``. When the caller goes away or
CancelTask is called, the agent gets a ``cancel`` frame; a deadline does the
same and then fails the task with DEADLINE_EXCEEDED. An agent that does not
answer a cancel within ``cancel_grace`` is wedged: its process is restarted. A task that did
not run (never sent, or refused as ``shutting_down``), or an idempotent one whose process died,
is tried again on a live replica, a few times, within its deadline (docs/agents.md, "Retries").

``Dispatcher`` gathers the parts: one attempt of a task on a replica is attempts.py's, cancelling
a task (CancelTask, a task given up on its agent) cancellation.py's, a task sent to another host
remote_tasks.py's; the use cases, the checks every task passes, the result cache, the retry rule
and the host calls are here.
"""

from __future__ import annotations

import asyncio
import math
import platform
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from ether_host.agents.attempts import TaskAttempts
from ether_host.agents.calls import CallHandler, HostCalls, child_task
from ether_host.agents.model import SUCCESS, TaskInput, TaskResult
from ether_host.agents.other_hosts import OtherHosts
from ether_host.agents.remote_tasks import RemoteExecution
from ether_host.agents.result_cache import ResultCache, cache_key
from ether_host.agents.result_cache import decode as cached_result
from ether_host.agents.result_cache import encode as cache_entry
from ether_host.agents.running import (
    BatchAnswer,
    BatchEvents,
    EventSink,
    NotRun,
    RunningTask,
    cancel_outcome,
    new_task_id,
    status_of,
    time_left,
)
from ether_host.agents.validation import (
    action_for_retry,
    check_budget,
    check_params,
    check_task_id,
    resolve_action,
)
from ether_host.errors import InvalidArgument, NotFound, Unavailable
from ether_host.link import AgentConnection
from ether_host.reasons import Reason
from ether_host.supervisor import ActionInfo, ManagedAgent, Supervisor
from ether_host.telemetry import Tracing

if TYPE_CHECKING:
    from ether_host.agents.batch import Batch, DispatcherSide, SentBatches

log = structlog.get_logger("ether.agents")

MAX_DEPTH = 8
# A task that did not run (never sent, or refused by an agent shutting down), or an idempotent
# one whose process died under it, is tried again on a live replica (or the restarted one) while
# its deadline allows, at most this many attempts in all: a fault costs the caller nothing, and
# an agent that kills every task it gets is not fed the same task for ever.
MAX_ATTEMPTS = 5
RETRY_BACKOFF = 0.025  # before the 2nd attempt; doubled for each next one (jittered)
RETRY_BACKOFF_CAP = 0.5


class Dispatcher(TaskAttempts, RemoteExecution):
    """Runs tasks on supervised agents and answers their host calls."""

    def __init__(
        self, supervisor: Supervisor, *, max_depth: int = MAX_DEPTH, tracing: Tracing | None = None
    ) -> None:
        self.supervisor = supervisor
        self.max_depth = max_depth
        self.tracing = tracing  # None when tracing is off: then no span is made at all
        self._running: dict[str, RunningTask] = {}
        self._by_frame: dict[tuple[int, str], RunningTask] = {}
        # Told each task's end (agent, action, status, seconds) when the host's metrics are on.
        self.task_ended: Callable[[str, str, str, float], None] | None = None
        # Told each end of a task sent to another host (agent, status, seconds), when on.
        self.remote_task_ended: Callable[[str, str, float], None] | None = None
        # Told of each result-cache lookup (agent, action, hit) when metrics are on.
        self.cache_looked_up: Callable[[str, str, bool], None] | None = None
        self._calls = HostCalls(supervisor, self._caller, tracing)
        self._calls.register("agent.call", self._agent_call)
        # What metadata.host says: the machine, or the host's name in its cluster (set at join).
        self.host_name = platform.node()
        # Set by the cluster when this host is in one: where a task for an agent this host
        # does not run goes. None on a single host.
        self.other_hosts: OtherHosts | None = None
        # Where SUCCESS results of actions declared with a cache_ttl are kept: in memory (set by
        # main.py), in Redis in a cluster (set at join); None: no cache at all.
        self.result_cache: ResultCache | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        # The loop run() runs on, passed to asyncio where it would look it up: that lookup
        # is a getpid(2) each time, several times per task. None before run().
        self._loop: asyncio.AbstractEventLoop | None = None
        self._batch: tuple[type[Batch], DispatcherSide] | None = None  # execute_batch's, made once
        supervisor.serve_calls_with(self._calls.handle)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the background work of tasks (cancel watchers) until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self._loop = asyncio.get_running_loop()
            task_status.started()
            await anyio.sleep_forever()

    def register_calls(self, method_or_prefix: str, handler: CallHandler) -> None:
        """Serve ``method`` (or every ``prefix.*`` method) for agents that may call it."""
        self._calls.register(method_or_prefix, handler)

    # -- public use cases ----------------------------------------------------------------

    async def execute(
        self, task: TaskInput, on_event: EventSink | None = None, *, from_cluster: bool = False
    ) -> TaskResult:
        """Run a task to its end. A task that ran and failed is a TaskResult with status ERROR.

        ``from_cluster``: the task came off the cluster's stream (cluster/remote.py), where this
        host may have claimed a task it sent itself (its caller here, waiting for the answer
        under the same id, while the host it went to was judged dead): that wait is no
        duplicate, and CancelTask reaches this run while it lasts."""
        try:
            agent = self.supervisor.get(task.agent)
        except NotFound:
            if self.other_hosts is None:
                raise
            return await self._execute_elsewhere(task, self.other_hosts, on_event)
        waiting = self._admit(task, from_cluster)
        action = resolve_action(agent, task) if agent.actions else None
        cached_as, cache_ttl = "", 0.0
        if action is not None:
            check_params(agent, action, task.params)
            # The one check a task of an action without a cache_ttl pays for the cache.
            if action.cache_ttl and self.result_cache is not None:
                cached_as, cache_ttl = (
                    cache_key(agent.name, action.name, agent.version, task.params),
                    action.cache_ttl,
                )
                if not task.force_refresh:
                    hit = await self._cached(cached_as, task)
                    if self.cache_looked_up is not None:
                        self.cache_looked_up(agent.name, action.name, hit is not None)
                    if hit is not None:
                        return hit
        deadline = task.deadline
        if task.budget.max_time is not None:
            deadline = min(deadline or math.inf, time.monotonic() + task.budget.max_time)
        record = RunningTask(task, agent=agent.name, deadline=deadline)
        record.owner = asyncio.current_task(self._loop)
        if self.task_ended is not None:
            record.began = time.perf_counter()
        task.root_task = task.root_task or task.task_id
        tracing = self.tracing
        if tracing is not None:  # under the current span: the RPC's, or the host call's
            record.span = tracing.start_task(
                task.task_id,
                agent.name,
                action.name if action is not None else task.action,
                task.params,
                traceparent=task.traceparent,  # sent by another host: its caller's span
                tracestate=task.tracestate,
                run_id=task.workflow,  # the workflow run it belongs to
            )
        result: TaskResult | None = None
        # What ended the task, caught here: sys.exc_info() in the finally would also see an
        # exception the caller is handling around this call, and end a good task as failed.
        raised: BaseException | None = None
        self._running[task.task_id] = record
        try:
            attempt = 1
            while True:
                try:
                    result = await self._attempt(agent, record, action, attempt, on_event)
                    if cached_as and result.status == SUCCESS:
                        await self._keep(cached_as, result, cache_ttl)
                    return result
                except Unavailable as error:
                    delay = self._retry_delay(record, action, attempt, error)
                    if delay is None:
                        raise
                    attempt += 1
                    log.info(
                        "retrying task",
                        task_id=task.task_id,
                        attempt=attempt,
                        reason=error.reason,
                        after=round(delay, 3),
                    )
                    # The replica that failed is already out of the rotation: the next attempt
                    # goes to a live one or waits for the restart. The pause only keeps a task
                    # from spinning through replicas that die as soon as they get it.
                    await asyncio.sleep(delay)
                    action = action_for_retry(agent, task, action)
        except asyncio.CancelledError as error:
            raised = cancel_outcome(record, error)
            if raised is error:
                raise
            raise raised from None
        except BaseException as error:
            raised = error
            raise
        finally:
            if waiting is None:
                self._running.pop(task.task_id, None)
            else:
                self._running[task.task_id] = waiting
            if record.began and raised is not None:
                # Not told yet: an error ends the task (a result was told where it was made).
                self._task_failed(agent, record, action, raised)
            if record.span is not None and tracing is not None:
                tracing.end_task(record.span, result, raised)

    async def execute_batch(
        self,
        tasks: Sequence[TaskInput],
        answer: BatchAnswer,
        on_event: BatchEvents | None = None,
    ) -> None:
        """Run ``tasks`` as ``execute`` runs each, ``answer(index, outcome)`` once per task as it
        ends (in the order they end), and, when given, ``on_event(index, event)`` for what
        execute tells its ``on_event``. The tasks that can start at once are sent together and
        answered from the link's read callback, without a coroutine each (agents/batch.py).
        Returns once every task was answered; cancelled (the caller went away), every task still
        running gets its cancel frame. CancelTask (``cancel``) finds each task by its id."""
        batch, side = self._batch_parts()
        await batch(self, side, answer, on_event).run(tasks)

    def send_batch(
        self,
        tasks: Sequence[TaskInput],
        answer: BatchAnswer,
        group: asyncio.TaskGroup,
        owner: SentBatches,
    ) -> Awaitable[None] | None:
        """``execute_batch`` without a coroutine of its own, for a caller that has one (a Pipe
        stream's reader: a task per message was ~5 µs of its CPU): the tasks that can start at
        once are sent before this returns, the rest run as tasks of ``group``, and ``owner``
        holds the batch until every task is answered (the caller abandons what it holds if it
        goes away first). What it returns, when not None, is to be awaited before sending more:
        an agent's stdin is past its high-water mark."""
        batch_type, side = self._batch_parts()
        full = batch_type(self, side, answer, None, owner).send(tasks, group)
        if not full:
            return None
        from ether_host.agents.batch import drain

        return drain(full)

    def _batch_parts(self) -> tuple[type[Batch], DispatcherSide]:
        made = self._batch
        if made is None:
            # batch.py builds on this module (its records, errors and types): imported here,
            # and its view of the dispatcher made once, not per batch: a Pipe stream sending one
            # task per message runs a batch per message.
            from ether_host.agents.batch import Batch, DispatcherSide

            side = DispatcherSide(
                self._admit,
                self._running,
                self._by_frame,
                self._abandon,
                self._task_failed,
                self._retry_delay,
                self._attempt,
            )
            made = self._batch = (Batch, side)
        return made

    async def _cached(self, key: str, task: TaskInput) -> TaskResult | None:
        """The cached answer to ``task``, or None: nothing kept under ``key`` (or expired)."""
        assert self.result_cache is not None
        clock = time.monotonic()
        entry = await self.result_cache.get(key)
        if entry is None:
            return None
        log.debug("result from the cache", task_id=task.task_id, agent=task.agent)
        return cached_result(entry, task.task_id, time.monotonic() - clock)

    async def _keep(self, key: str, result: TaskResult, ttl: float) -> None:
        assert self.result_cache is not None
        await self.result_cache.put(key, cache_entry(result), ttl)

    def _admit(self, task: TaskInput, from_cluster: bool = False) -> RunningTask | None:
        """The checks every task passes here or elsewhere: its budget, and its id (a new one
        when the caller gave none; a caller's must not name a task running now). Returns this
        host's own wait for the task to run elsewhere when the task is that one, come back
        from the cluster (see ``execute``)."""
        check_budget(task.budget)
        if task.task_id:
            check_task_id(task.task_id)
        else:
            task.task_id = new_task_id()
        running = self._running.get(task.task_id)
        if running is not None:
            if from_cluster and running.remote:
                return running
            raise InvalidArgument(
                f"task_id {task.task_id!r} is already running; use another id",
                reason=Reason.DUPLICATE_TASK_ID,
            )
        return None

    def _task_failed(
        self,
        agent: ManagedAgent,
        record: RunningTask,
        action: ActionInfo | None,
        raised: BaseException,
    ) -> None:
        """Tell the metrics of a task that ended with an error (its code is the status): the
        action's name only when the agent declares it, so a caller's typo is no new label."""
        assert self.task_ended is not None
        name = action.name if action is not None else record.task.action
        if action is None and not any(a.name == name for a in agent.actions):
            name = ""
        self.task_ended(agent.name, name, status_of(raised), time.perf_counter() - record.began)

    def _retry_delay(
        self, record: RunningTask, action: ActionInfo | None, attempt: int, error: Unavailable
    ) -> float | None:
        """How long to wait before trying ``record``'s task again, or None: do not.

        A task that did not run (never sent, or refused by an agent that is shutting down) may
        go again whatever its action; one that was sent to a process that died may have run, so
        it goes again only when it is idempotent (by the action, or by ``AgentInput``).
        """
        task = record.task
        idempotent = (
            task.idempotent if task.idempotent is not None else bool(action and action.idempotent)
        )
        if not (idempotent or isinstance(error, NotRun)) or attempt >= MAX_ATTEMPTS:
            return None
        delay = min(RETRY_BACKOFF_CAP, RETRY_BACKOFF * 2 ** (attempt - 1))
        delay *= random.uniform(0.5, 1.0)
        # No time left for another attempt after the pause: the caller gets this error now, not
        # a DEADLINE_EXCEEDED later that hides what happened.
        return delay if time_left(record.deadline) > delay else None

    # -- host calls ----------------------------------------------------------------------

    def _caller(self, connection: AgentConnection, frame_id: str) -> RunningTask | None:
        return self._by_frame.get((id(connection), frame_id))

    async def _agent_call(self, caller: RunningTask, method: str, params: dict[str, Any]) -> Any:
        del method
        result = await self.execute(child_task(caller, params, self.max_depth))
        caller.spent_cost += result.metadata.cost
        return result.as_json()
