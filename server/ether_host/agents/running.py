"""A task in flight and the parts both ways of running one share (``Dispatcher.execute``, one
coroutine per task, and the batch path, agents/batch.py): its record, its id, its ``task``
frame, and the errors of an attempt that failed (which of them may be tried again).
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ether_host.agents.model import TaskEvent, TaskInput, TaskResult
from ether_host.errors import Cancelled, EtherError, Unavailable
from ether_host.link import NOT_RUN, SHUTTING_DOWN, AgentConnection, LinkClosed, Pending
from ether_host.reasons import Reason
from ether_host.supervisor import ActionInfo, ManagedAgent, Replica
from ether_host.telemetry import Span

EventSink = Callable[[TaskEvent], None]
# execute_batch: what each task of a batch ends with, by its index (its result, or the error
# execute() would have raised), and the events execute() tells its on_event, by index.
BatchAnswer = Callable[[int, TaskResult | EtherError], None]
BatchEvents = Callable[[int, TaskEvent], None]


@dataclass(slots=True)
class RunningTask:
    """A task in flight, findable by its public id and by its frame id."""

    task: TaskInput
    # The asyncio task running execute(): CancelTask cancels it natively. The hot path
    # uses asyncio primitives, not anyio's (grpc.aio pins asyncio anyway): anyio's
    # cancel scopes and events cost ~12 % of the host's CPU per Execute (bench/RESULTS.md).
    owner: asyncio.Task[Any] | None = None
    cancel_reason: str = ""  # set by cancel(): the owner's next CancelledError is ours
    # A task of the batch path (agents/batch.py) has no owner to cancel: cancel() calls this
    # with the reason instead.
    on_cancel: Callable[[str], None] | None = None
    spent_cost: float = 0.0  # reported by finished child tasks
    children: int = 0
    agent: str = ""
    # perf_counter at the start when metrics are on (task durations); 0.0 once the end is told.
    began: float = 0.0
    deadline: float | None = None
    span: Span | None = None  # the task's span, when traced: its host calls' parent
    # The caller's wait for another host to run the task (Dispatcher._execute_elsewhere).
    remote: bool = False

    def remaining_cost(self) -> float | None:
        limit = self.task.budget.max_cost
        return None if limit is None else max(0.0, limit - self.spent_cost)


class _TaskIds:
    """Unguessable task ids (CancelTask takes one as its only credential), drawn from a block of
    system randomness fetched 512 ids at a time: one getrandom(2) per task was a syscall on
    the hot path."""

    ID_BYTES = 8

    def __init__(self) -> None:
        self._block = b""
        self._at = 0

    def new(self) -> str:
        if self._at >= len(self._block):
            self._block, self._at = secrets.token_bytes(self.ID_BYTES * 512), 0
        start, self._at = self._at, self._at + self.ID_BYTES
        return "t-" + self._block[start : self._at].hex()


new_task_id = _TaskIds().new


def task_frame(
    frame_id: str,
    task: TaskInput,
    action: ActionInfo,
    deadline: float | None,
    attempt: int,
) -> dict[str, Any]:
    """The ``task`` frame of one attempt (docs/protocol.md): what the agent is told of the task,
    its deadline (as milliseconds left) and the budget limits it watches itself."""
    left = time_left(deadline)
    limits = task.budget
    budget: dict[str, Any] = {}  # the limits the agent watches itself, those set
    if limits.max_cost is not None:
        budget["max_cost"] = limits.max_cost
    if limits.max_iterations is not None:
        budget["max_iterations"] = limits.max_iterations
    return {
        "type": "task",
        "id": frame_id,
        "action": action.name,
        "params": task.params,
        # Rounded up: the agent's copy of the deadline never falls before the host's.
        "deadline_ms": 0 if left == math.inf else max(1, math.ceil(left * 1000)),
        "attempt": attempt,
        "trace": {
            "root_id": task.root_task,
            "parent_id": task.parent_task,
            "depth": task.depth,
        },
        "task_id": task.task_id,
        "session_id": task.session_id,
        "budget": budget,
    }


class NotRun(Unavailable):
    """The agent did not run the task: trying it again cannot run it twice."""


class NotSent(NotRun):
    """The replica was gone before the task frame went out: the agent never saw the task."""


class Refused(NotRun):
    """The agent answered ``shutting_down``: it takes no more tasks and did not run this one."""


def refused(pending: Pending) -> bool:
    """Whether the agent answered that it did not run the task: it drains (``shutting_down``),
    or the link knows it dropped the task (``not_run``: see AgentConnection.handshake)."""
    result = pending.result
    if result is None:
        return False
    error = result.get("error")
    return isinstance(error, dict) and error.get("code") in (SHUTTING_DOWN, NOT_RUN)


def cancelled(task_id: str, reason: str) -> Cancelled:
    """The error a task cancelled by cancel() (CancelTask, or its caller gone) ends with."""
    return Cancelled(f"task {task_id} was cancelled: {reason}", reason=Reason.TASK_CANCELLED)


def cancel_outcome(
    record: RunningTask, error: asyncio.CancelledError
) -> Cancelled | asyncio.CancelledError:
    """What a CancelledError that ends ``record``'s task is to its caller: ``Cancelled``
    (TASK_CANCELLED) when cancel() asked for it and nobody else cancels the task as well (the
    owner's cancel request is taken back), else ``error`` itself, to be raised on."""
    if record.cancel_reason and record.owner is not None and record.owner.uncancel() == 0:
        return cancelled(record.task.task_id, record.cancel_reason)
    return error


def time_left(deadline: float | None) -> float:
    return math.inf if deadline is None else max(0.0, deadline - time.monotonic())


def forward_events(kind: str, sink: EventSink | None) -> Callable[[dict[str, Any]], None] | None:
    if sink is None:
        return None
    return lambda frame: sink(TaskEvent(kind, frame))


def status_of(raised: BaseException | None) -> str:
    """The status a task that ended with ``raised`` counts under: its error's code."""
    if isinstance(raised, EtherError):
        return raised.code.value
    if isinstance(raised, asyncio.CancelledError):
        return "CANCELLED"  # the caller went away
    return "INTERNAL"


def died(
    error: type[Unavailable],
    agent: ManagedAgent,
    replica: Replica,
    connection: AgentConnection | None,
    task_id: str,
    closed: LinkClosed,
) -> Unavailable:
    """The error of a task whose agent process died under it, naming the limit that killed it:
    an OOM kill (its own memory limit or the agents' total) is known from the kernel's counters
    as soon as the link closes; a CPU time or file size limit from its exit signal, once the
    caller has waited for it (``Replica.exit_known``)."""
    ran_into = replica.ran_into(connection) if connection is not None else []
    why = f": {'; '.join(ran_into)}" if ran_into else ""
    return error(
        f"agent {agent.name} process {replica.pid or ''} died while running task {task_id}{why} ({closed})",
        reason=Reason.AGENT_DIED,
        resource=("agent", agent.name),
        retry_after=1.0,
    )


def shutting_down(
    agent: ManagedAgent, replica: Replica, task_id: str, pending: Pending | None = None
) -> Refused:
    """The error of a task the agent refused (see ``refused``: it did not run it, safe to
    retry)."""
    error = pending.result.get("error") if pending is not None and pending.result else None
    if isinstance(error, dict) and error.get("code") == NOT_RUN:
        return Refused(
            f"agent {agent.name} process {replica.pid or ''} said hello after the host had "
            f"taken it for a seeds-style agent, and dropped task {task_id} sent before its "
            "welcome",
            reason=Reason.AGENT_UNAVAILABLE,
            resource=("agent", agent.name),
            retry_after=1.0,
        )
    return Refused(
        f"agent {agent.name} process {replica.pid or ''} is shutting down and refused task {task_id}",
        reason=Reason.AGENT_SHUTTING_DOWN,
        resource=("agent", agent.name),
        retry_after=1.0,
    )
