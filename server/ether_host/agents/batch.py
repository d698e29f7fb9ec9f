"""The dispatcher's batch path: the tasks of a batch admitted, checked and sent in one go, each
answered by a callback when its result arrives, without a coroutine per task.

``Dispatcher.execute`` runs one task in a coroutine of its own: it waits for a slot, sends, waits
for the result, retries. For a batched Pipe message that is one asyncio task, one future and
one timer per task, most of the host's main-thread CPU per task (bench/RESULTS.md, "Batching").
Here a task that can start at once (its agent runs here, a replica has a free slot, nothing of
tracing or the result cache applies) is sent straight away: its frame is queued with the rest
of the batch (one write to the agent's stdin), its result finishes it from the link's read
callback (``Pending.on_finish``), its deadline is a timer, and CancelTask calls it back
(``RunningTask.on_cancel``). Everything else goes the general way, ``Dispatcher.execute`` in a
task of its own: a task that must queue for a slot, one for another host, a cached action,
a traced host. A task whose process dies (or that an agent shutting down refuses) continues
there too, in ``Dispatcher``'s retry loop from its second attempt, so every feature of
``execute`` holds: checks, deadlines, budgets, metadata, cancellation, retries, metrics.

The dispatcher runs a batch (``Dispatcher.execute_batch``, what batched Pipe and a workflow's map
stage call) and hands it ``DispatcherSide``: the few parts of its own state and rules the batch
shares with ``execute`` (its records of running tasks, its checks, cancel watcher and retry
rule), so this module reads nothing else of the dispatcher's; what needs no dispatcher (a task's
record and frame, the errors of a failed attempt) both take from running.py.

A caller that wants a task's events (``on_event``: its start, progress and log frames, as
``execute``'s ``on_event``; a workflow stage records them) pays for them; Pipe does not ask.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from ether_host.agents.dispatch import Dispatcher
from ether_host.agents.model import Metadata, TaskEvent, TaskInput, TaskResult
from ether_host.agents.results import answered_its_deadline, task_result
from ether_host.agents.running import (
    BatchAnswer,
    BatchEvents,
    EventSink,
    RunningTask,
    cancel_outcome,
    cancelled,
    died,
    refused,
    shutting_down,
    task_frame,
    time_left,
)
from ether_host.agents.validation import action_for_retry, check_params, resolve_action
from ether_host.errors import (
    Cancelled,
    DeadlineExceeded,
    EtherError,
    InvalidArgument,
    NotFound,
    Unavailable,
)
from ether_host.link import AgentConnection, LinkClosed, Pending, TaskFailure
from ether_host.reasons import Reason
from ether_host.supervisor import ActionInfo, ManagedAgent, Replica

log = structlog.get_logger("ether.agents")


@dataclass(frozen=True, slots=True)
class DispatcherSide:
    """What the batch path shares with ``Dispatcher.execute``, handed over by the dispatcher."""

    admit: Callable[[TaskInput], object]  # the checks every task passes; gives it an id
    running: dict[str, RunningTask]  # by task id: what CancelTask finds
    by_frame: dict[tuple[int, str], RunningTask]  # by (link, frame id): whose host calls
    abandon: Callable[[AgentConnection, Replica, Pending, str], bool]  # cancel frame + watcher
    task_failed: Callable[[ManagedAgent, RunningTask, ActionInfo | None, BaseException], None]
    retry_delay: Callable[[RunningTask, ActionInfo | None, int, Unavailable], float | None]
    attempt: Callable[
        [ManagedAgent, RunningTask, ActionInfo | None, int, EventSink | None],
        Awaitable[TaskResult],
    ]


@dataclass(eq=False, slots=True)
class _Flight:
    """A task of the batch sent on the fast path and not answered yet."""

    index: int
    agent: ManagedAgent
    action: ActionInfo
    record: RunningTask
    replica: Replica
    connection: AgentConnection
    pending: Pending
    started: float  # time.time() when sent (metadata.started_at)
    clock: float  # time.monotonic() when sent (metadata.duration)
    timer: asyncio.TimerHandle | None = None
    ended: bool = False


class Batch:
    """One call of ``Dispatcher.execute_batch`` (``run``) or ``Dispatcher.send_batch``
    (``send``)."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        side: DispatcherSide,
        answer: BatchAnswer,
        on_event: BatchEvents | None,
        owner: SentBatches | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._side = side
        self._answer = answer
        self._on_event = on_event
        self._owner = owner  # send's: who holds the batch until every task is answered
        self._flying: set[_Flight] = set()  # sent on the fast path, not answered
        self._others = 0  # tasks in a coroutine of their own (general path, retries), running
        self._all_answered: asyncio.Future[None] | None = None
        self._tg: asyncio.TaskGroup | None = None
        # Retries of tasks whose process died while the batch was being sent: started once
        # the batch's task group is open.
        self._deferred: list[tuple[_Flight, Unavailable]] = []
        # Tasks sent whose start the caller's on_event has not been told yet, and the links
        # their frames went to (``_tell_started``).
        self._untold: list[tuple[int, int]] = []  # (index, pid)
        self._sent_on: set[AgentConnection] = set()

    async def run(self, tasks: Sequence[TaskInput]) -> None:
        loop = asyncio.get_running_loop()
        self._all_answered = loop.create_future()
        general: list[tuple[int, TaskInput]] = []
        full: set[AgentConnection] = set()  # links past their high-water mark: drain them
        try:
            for index, task in enumerate(tasks):
                try:
                    if not self._start(index, task, full, loop):
                        general.append((index, task))
                except EtherError as refused:
                    self._answer(index, refused)
            if self._untold:
                self._tell_started()
            if not general and not full and not self._deferred:
                # Every task went out on the fast path (or was refused): no coroutine to own,
                # so no task group yet. Opening one costs about as much as the rest of a task
                # (~9 µs in-process), and a Pipe stream that sends one task per message opens
                # one per message. A task that must be retried wakes this wait (_retry).
                if self._flying:
                    await self._all_answered
                if not self._deferred:
                    return
                self._all_answered = loop.create_future()  # set by the wake: wait again
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                for flight, error in self._deferred:
                    tg.create_task(self._retried(flight, error), name="batch task retry")
                self._deferred.clear()
                for index, task in general:
                    self._others += 1
                    tg.create_task(self._execute(index, task), name="batch task")
                await drain(full)
                if self._flying or self._others:
                    await self._all_answered
        except BaseException:
            for flight in list(self._flying):
                self._give_up(flight, "caller went away", None)
            for flight, _ in self._deferred:  # a retry woke the wait, and never started
                self._others -= 1
                self._end(flight, None)
            self._deferred.clear()
            raise
        finally:
            self._tg = None

    def send(self, tasks: Sequence[TaskInput], group: asyncio.TaskGroup) -> set[AgentConnection]:
        """``run`` without a coroutine of the batch's own, for a caller that owns one already (a
        Pipe stream's reader): the tasks that can start at once are sent before this returns,
        the others (the general path, retries) run as tasks of ``group``. The batch's owner
        holds it until every task is answered, and abandons it if the caller goes away first.
        Returns the links past their high-water mark: drain them before sending more."""
        loop = asyncio.get_running_loop()
        self._tg = group
        full: set[AgentConnection] = set()
        for index, task in enumerate(tasks):
            try:
                if not self._start(index, task, full, loop):
                    self._others += 1
                    group.create_task(self._execute(index, task), name="batch task")
            except EtherError as refused:
                self._answer(index, refused)
        if self._untold:
            self._tell_started()
        if (self._flying or self._others) and self._owner is not None:
            self._owner.add(self)
        return full

    def abandon(self) -> None:
        """The caller of ``send`` went away: every task still on an agent gets its cancel frame,
        as ``run``'s do when it is cancelled (tasks in ``group`` end with it)."""
        for flight in list(self._flying):
            self._give_up(flight, "caller went away", None)

    # -- the fast path -------------------------------------------------------------------

    def _start(
        self,
        index: int,
        task: TaskInput,
        full: set[AgentConnection],
        loop: asyncio.AbstractEventLoop,
    ) -> bool:
        """Check ``task`` and send it on the fast path; False: it takes the general path.
        Raises the EtherError that execute() would for a task it refuses."""
        dispatcher = self._dispatcher
        if dispatcher.tracing is not None:
            return False
        try:
            agent = dispatcher.supervisor.get(task.agent)
        except NotFound:
            if dispatcher.other_hosts is None:
                raise
            return False  # another host runs it
        if not agent.actions:
            return False
        side = self._side
        side.admit(task)
        action = resolve_action(agent, task)
        check_params(agent, action, task.params)
        if action.cache_ttl and dispatcher.result_cache is not None:
            return False
        replica = agent.try_acquire(reentrant=agent.name in task.lineage)
        if replica is None:
            return False  # it waits in the agent's queue
        connection = replica.connection
        if connection is None or not connection.sends_nowait:
            agent.release(replica)
            return False
        deadline = task.deadline
        if task.budget.max_time is not None:
            deadline = min(deadline or math.inf, time.monotonic() + task.budget.max_time)
        record = RunningTask(task, agent=agent.name, deadline=deadline)
        if dispatcher.task_ended is not None:
            record.began = time.perf_counter()
        task.root_task = task.root_task or task.task_id
        frame_id = connection.next_id()
        pending = connection.register(frame_id)
        pending.task_id = task.task_id
        frame = task_frame(frame_id, task, action, deadline, 1)
        try:
            if connection.send_task_nowait(pending, frame):
                full.add(connection)
        except TaskFailure as failure:
            agent.release(replica)
            raise InvalidArgument(
                f"task {task.task_id} cannot be sent to agent {agent.name}: {failure.message}",
                reason=Reason.FRAME_TOO_LARGE,
                resource=("agent", agent.name),
            ) from None
        except LinkClosed:
            agent.release(replica)
            replica.link_lost(connection)
            return False  # not sent: the general path tries a live replica
        flight = _Flight(
            index,
            agent,
            action,
            record,
            replica,
            connection,
            pending,
            time.time(),
            time.monotonic(),
        )
        side.running[task.task_id] = record
        side.by_frame[(id(connection), frame_id)] = record
        record.on_cancel = lambda reason: self._give_up(
            flight,
            reason,
            cancelled(task.task_id, reason),
        )
        pending.on_finish = lambda _: self._landed(flight)
        if deadline is not None:
            flight.timer = loop.call_later(time_left(deadline), self._deadline, flight)
        self._flying.add(flight)
        on_event = self._on_event
        if on_event is not None:  # sent: the task started, told once the batch is sent
            self._untold.append((index, replica.pid))
            self._sent_on.add(connection)
            pending.on_progress = lambda frame: on_event(index, TaskEvent("progress", frame))
            pending.on_log = lambda frame: on_event(index, TaskEvent("log", frame))
        return True

    def _tell_started(self) -> None:
        """Tell the caller the start of each task sent, once every frame of the batch is
        written: a caller that records each start (a workflow stage: its events and rows, a
        few µs a task) would otherwise hold the frames back until the end of the loop's turn,
        and the agent would wait for all of that before it could begin. No answer can come in
        between: answers are read in a later turn."""
        for connection in self._sent_on:
            connection.send_queued()
        self._sent_on.clear()
        on_event = self._on_event
        assert on_event is not None
        untold, self._untold = self._untold, []
        for index, pid in untold:
            on_event(index, TaskEvent("started", {"pid": pid, "attempt": 1}))

    def _landed(self, flight: _Flight) -> None:
        """The agent answered (or its process died): runs in the link's read callback, so
        nothing may escape it."""
        if flight.ended:
            return
        try:
            self._settle(flight)
        except Exception as error:  # a bug here must not leave the task unanswered
            log.exception("batch task settling failed", task_id=flight.record.task.task_id)
            self._end(flight, _internal(flight, error))

    def _settle(self, flight: _Flight) -> None:
        pending, record, agent = flight.pending, flight.record, flight.agent
        task = record.task
        failure = pending.failure
        if isinstance(failure, LinkClosed):
            self._release(flight)
            flight.replica.link_lost(flight.connection)
            self._retry(
                flight,
                died(Unavailable, agent, flight.replica, flight.connection, task.task_id, failure),
            )
            return
        if answered_its_deadline(pending, record.deadline):
            self._release(flight)
            self._end(flight, _deadline_exceeded(flight))
            return
        if refused(pending):
            self._release(flight)
            self._retry(flight, shutting_down(agent, flight.replica, task.task_id, pending))
            return
        metadata = Metadata(
            duration=time.monotonic() - flight.clock,
            started_at=flight.started,
            host=self._dispatcher.host_name,
            pid=flight.replica.pid,
            attempt=1,
        )
        action = flight.action.name
        result = task_result(
            task.task_id, agent.name, action, pending, metadata, task.budget, record.spent_cost
        )
        task_ended = self._dispatcher.task_ended
        if task_ended is not None:
            task_ended(agent.name, action, result.status, time.perf_counter() - record.began)
            record.began = 0.0
        self._release(flight)
        self._end(flight, result)

    def _deadline(self, flight: _Flight) -> None:
        if flight.ended:
            return
        left = time_left(flight.record.deadline)
        if left > 0:  # uvloop's timers may fire a little early
            flight.timer = asyncio.get_running_loop().call_later(left, self._deadline, flight)
            return
        self._give_up(flight, "deadline exceeded", _deadline_exceeded(flight))

    def _give_up(self, flight: _Flight, reason: str, error: EtherError | None) -> None:
        """Stop waiting for a task still on the agent (deadline, CancelTask, the caller gone):
        a cancel frame, and its slot to the dispatcher's cancel watcher, as execute does.
        ``error`` None: nobody is told (the caller went away)."""
        if flight.ended:
            return
        flight.ended = True
        flight.pending.on_finish = None
        handed_over = self._side.abandon(flight.connection, flight.replica, flight.pending, reason)
        self._release(flight, handed_over=handed_over)
        self._end(flight, error)

    def _release(self, flight: _Flight, *, handed_over: bool = False) -> None:
        """The task's frame id and slot back, as the end of Dispatcher._attempt does."""
        flight.ended = True
        if flight.timer is not None:
            flight.timer.cancel()
        frame_id = flight.pending.frame_id
        self._side.by_frame.pop((id(flight.connection), frame_id), None)
        if not handed_over:
            flight.agent.release(flight.replica)
            flight.connection.forget(frame_id)

    def _end(self, flight: _Flight, outcome: TaskResult | EtherError | None) -> None:
        record = flight.record
        # The task's callbacks close over its flight, which holds them: a cycle per task, and
        # through the batch's answer callback everything of its caller's (a workflow run with
        # every task of it), left to the cyclic collector, whose full pass is rare: an idle host
        # kept a 100,000-task run in memory after it ended. Cut, they go with the last reference.
        record.on_cancel = None
        flight.pending.on_finish = None
        self._side.running.pop(record.task.task_id, None)
        if record.began and not isinstance(outcome, TaskResult):
            raised = outcome if outcome is not None else asyncio.CancelledError()
            self._side.task_failed(flight.agent, record, flight.action, raised)
        self._flying.discard(flight)
        if outcome is not None:
            self._answer(flight.index, outcome)
        self._check_done()

    def _check_done(self) -> None:
        if self._flying or self._others:
            return
        done = self._all_answered
        if done is not None and not done.done():
            done.set_result(None)
        if self._owner is not None:
            self._owner.discard(self)

    # -- the general path ----------------------------------------------------------------

    def _events_of(self, index: int) -> EventSink | None:
        on_event = self._on_event
        if on_event is None:
            return None
        return lambda event: on_event(index, event)

    async def _execute(self, index: int, task: TaskInput) -> None:
        try:
            outcome: TaskResult | EtherError = await self._dispatcher.execute(
                task, self._events_of(index)
            )
        except EtherError as error:
            outcome = error
        finally:
            self._others -= 1
        self._answer(index, outcome)
        self._check_done()

    def _retry(self, flight: _Flight, error: Unavailable) -> None:
        """Go on with the task as execute's retry loop does after a first attempt that failed
        with ``error``: in a coroutine of its own, which CancelTask cancels as execute's."""
        self._flying.discard(flight)
        self._others += 1
        if self._tg is None:  # still sending the batch, or waiting without a task group
            self._deferred.append((flight, error))
            waiting = self._all_answered
            if waiting is not None and not waiting.done():
                waiting.set_result(None)  # run() opens its task group for the retry
        else:
            retried = self._retried(flight, error)
            try:
                self._tg.create_task(retried, name="batch task retry")
            except RuntimeError:  # send's caller's group is ending: the caller went away
                retried.close()
                self._others -= 1
                self._end(flight, None)

    async def _retried(self, flight: _Flight, error: Unavailable) -> None:
        side, record = self._side, flight.record
        task = record.task
        record.owner, record.on_cancel = asyncio.current_task(), None
        events = self._events_of(flight.index)
        outcome: TaskResult | EtherError | None = None
        attempt = 1
        if record.cancel_reason:  # CancelTask came between the failed attempt and now
            outcome = cancelled(task.task_id, record.cancel_reason)
        try:
            failure = flight.pending.failure
            if outcome is None and isinstance(failure, LinkClosed):
                # As attempts.py's: a process killed for its CPU time or file size limit is
                # known by its exit signal, a moment after its stdout closed (which failed
                # this task in the link's read callback, which cannot wait): the error names
                # the limit once it is known.
                await flight.replica.exit_known(flight.connection, time_left(record.deadline))
                replica, connection = flight.replica, flight.connection
                error = died(Unavailable, flight.agent, replica, connection, task.task_id, failure)
            while outcome is None:
                delay = side.retry_delay(record, flight.action, attempt, error)
                if delay is None:
                    outcome = error
                    break
                attempt += 1
                log.info(
                    "retrying task",
                    task_id=task.task_id,
                    attempt=attempt,
                    reason=error.reason,
                    after=round(delay, 3),
                )
                await asyncio.sleep(delay)
                flight.action = action_for_retry(flight.agent, task, flight.action) or flight.action
                try:
                    outcome = await side.attempt(
                        flight.agent, record, flight.action, attempt, events
                    )
                except Unavailable as again:
                    error = again
        except asyncio.CancelledError as stopped:
            ended = cancel_outcome(record, stopped)
            if not isinstance(ended, Cancelled):
                self._others -= 1
                self._end(flight, None)
                raise
            outcome = ended
        except EtherError as failed:
            outcome = failed
        self._others -= 1
        self._end(flight, outcome)


class SentBatches:
    """The batches a caller sent itself (``Dispatcher.send_batch``) with tasks not answered
    yet. The caller owns those tasks as ``execute_batch``'s coroutine would: if it goes away
    first (a Pipe stream cancelled), ``abandon`` sends each task still on an agent its cancel
    frame."""

    __slots__ = ("_batches",)

    def __init__(self) -> None:
        self._batches: set[Batch] = set()

    def add(self, batch: Batch) -> None:
        self._batches.add(batch)

    def discard(self, batch: Batch) -> None:
        self._batches.discard(batch)

    def abandon(self) -> None:
        for batch in list(self._batches):
            batch.abandon()


async def drain(links: set[AgentConnection]) -> None:
    """Wait until each agent's stdin took what is queued past its high-water mark (a process
    that is gone fails its tasks through its link)."""
    for link in links:
        with contextlib.suppress(LinkClosed):
            await link.drain()


def _deadline_exceeded(flight: _Flight) -> DeadlineExceeded:
    task = flight.record.task
    return DeadlineExceeded(
        f"task {task.task_id} on agent {flight.agent.name} did not finish before its deadline",
        reason=Reason.TASK_DEADLINE_EXCEEDED,
        resource=("task", task.task_id),
    )


def _internal(flight: _Flight, error: Exception) -> EtherError:
    return Unavailable(
        f"task {flight.record.task.task_id}: the host failed to read its answer ({type(error).__name__})",
        reason=Reason.AGENT_UNAVAILABLE,
        resource=("agent", flight.agent.name),
    )
