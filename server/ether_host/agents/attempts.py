"""One attempt of a task on a replica: a free slot (or a wait in the queue until the deadline),
the ``task`` frame written, the wait for the agent's answer, and what else ends the attempt (the
deadline, the caller gone, the agent refusing the task as it shuts down, its process dying).

A part of ``Dispatcher`` (dispatch.py), apart from the use cases: ``execute`` makes a task's
attempts and its retry rule decides whether another follows; the batch path makes them too, for
a task that goes on past its first. An attempt cut short is abandoned as cancellation.py says.
What it reads of the dispatcher is declared below and set by ``Dispatcher.__init__``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import anyio

from ether_host.agents.cancellation import TaskCancellation
from ether_host.agents.model import Metadata, TaskEvent, TaskResult
from ether_host.agents.results import answered_its_deadline, task_result
from ether_host.agents.running import (
    EventSink,
    NotSent,
    RunningTask,
    died,
    forward_events,
    refused,
    shutting_down,
    task_frame,
    time_left,
)
from ether_host.agents.validation import check_params, resolve_action
from ether_host.errors import DeadlineExceeded, InvalidArgument, Unavailable
from ether_host.link import LinkClosed, Pending, TaskFailure
from ether_host.reasons import Reason
from ether_host.supervisor import ActionInfo, ManagedAgent, Replica
from ether_host.telemetry import Span, Tracing


class TaskAttempts(TaskCancellation):
    """The dispatcher's attempts: one task on one replica, from its slot to its answer."""

    # The dispatcher's, set by Dispatcher.__init__ (dispatch.py).
    tracing: Tracing | None
    host_name: str
    task_ended: Callable[[str, str, str, float], None] | None
    _by_frame: dict[tuple[int, str], RunningTask]
    _loop: asyncio.AbstractEventLoop | None

    # -- one attempt ---------------------------------------------------------------------

    async def _attempt(
        self,
        agent: ManagedAgent,
        record: RunningTask,
        action: ActionInfo | None,
        attempt: int,
        on_event: EventSink | None,
    ) -> TaskResult:
        task = record.task
        deadline = record.deadline
        reentrant = agent.name in task.lineage
        replica = agent.try_acquire(reentrant=reentrant)
        if replica is None:  # every slot is taken: wait in the queue
            queued = None if record.span is None else self._queue_span(record.span)
            with anyio.move_on_after(time_left(deadline)) as waiting:
                replica = await agent.acquire(reentrant=reentrant)
            if queued is not None:
                queued.end()
            if replica is None or waiting.cancelled_caught:
                raise DeadlineExceeded(
                    f"task {task.task_id} waited for a free slot on agent {agent.name} until its deadline",
                    reason=Reason.DEADLINE_WAITING_FOR_AGENT,
                    resource=("agent", agent.name),
                )
        connection = replica.connection
        frame_id = ""
        pending: Pending | None = None
        handed_over = False  # an abandoned task's slot is released by its cancel watcher
        try:
            if connection is None:
                raise NotSent(
                    f"agent {agent.name} replica {replica.index} stopped before the task was sent",
                    reason=Reason.AGENT_UNAVAILABLE,
                    retry_after=1.0,
                )
            if action is None:
                action = resolve_action(agent, task)
                check_params(agent, action, task.params)
            frame_id = connection.next_id()
            self._by_frame[(id(connection), frame_id)] = record
            started, clock = time.time(), time.monotonic()
            if on_event is not None:
                on_event(TaskEvent("started", {"pid": replica.pid, "attempt": attempt}))
            pending = connection.register(
                frame_id,
                on_progress=forward_events("progress", on_event),
                on_log=forward_events("log", on_event),
            )
            pending.task_id = task.task_id  # what the agent's log lines meanwhile are about
            frame = task_frame(frame_id, task, action, deadline, attempt)
            if record.span is not None:
                pending.trace_id = self._traced_frame(record.span, frame, replica, attempt)
            timed_out = False
            try:
                if connection.sends_nowait:  # queued at once; a wait only past the high-water
                    if connection.send_task_nowait(pending, frame):  # mark (no coroutines)
                        await connection.drain()
                else:
                    await connection.send_task(pending, frame)
                timed_out = not await pending.wait(deadline, self._loop)
            except asyncio.CancelledError:
                reason = record.cancel_reason or "caller went away"
                handed_over = self._abandon(connection, replica, pending, reason)
                raise
            if timed_out or answered_its_deadline(pending, deadline):
                handed_over = self._abandon(connection, replica, pending, "deadline exceeded")
                raise DeadlineExceeded(
                    f"task {task.task_id} on agent {agent.name} did not finish before its deadline",
                    reason=Reason.TASK_DEADLINE_EXCEEDED,
                    resource=("task", task.task_id),
                )
            if refused(pending):
                # The agent is draining (an outside SIGTERM, say) and did not run the task; the
                # link has taken this replica out of the rotation already.
                raise shutting_down(agent, replica, task.task_id, pending)
            metadata = Metadata(
                duration=time.monotonic() - clock,
                started_at=started,
                host=self.host_name,
                pid=replica.pid,
                attempt=attempt,
            )
            result = task_result(
                task.task_id,
                agent.name,
                action.name,
                pending,
                metadata,
                task.budget,
                record.spent_cost,
            )
            if self.task_ended is not None:  # the task's end: a returned result is not retried
                self.task_ended(
                    agent.name, action.name, result.status, time.perf_counter() - record.began
                )
                record.began = 0.0
            return result
        except TaskFailure as failure:  # the task frame is larger than the link's frame limit
            raise InvalidArgument(
                f"task {task.task_id} cannot be sent to agent {agent.name}: {failure.message}",
                reason=Reason.FRAME_TOO_LARGE,
                resource=("agent", agent.name),
            ) from None
        except LinkClosed as closed:
            if connection is not None:
                # Out of the rotation before the retry below picks a replica: the process's
                # exit may not be noticed yet, and the dead replica looks the least loaded.
                replica.link_lost(connection)
                # A process killed for its CPU time or file size limit is known by its exit
                # signal, a moment after its stdout closed: the error names the limit then.
                await replica.exit_known(connection, time_left(deadline))
            error = Unavailable if pending is not None and pending.sent else NotSent
            raise died(error, agent, replica, connection, task.task_id, closed) from None
        finally:
            if connection is not None and frame_id:
                self._by_frame.pop((id(connection), frame_id), None)
            if not handed_over:
                agent.release(replica)
                if connection is not None and frame_id:
                    connection.forget(frame_id)

    def _queue_span(self, task_span: Span) -> Span | None:
        """The span of a wait for a free slot, under the task's span."""
        assert self.tracing is not None
        return self.tracing.child_span("ether.queue_wait", task_span)

    @staticmethod
    def _traced_frame(span: Span, frame: dict[str, Any], replica: Replica, attempt: int) -> str:
        """Put the task span's W3C context in the task frame, and note a retry on the span (the
        last attempt's pid and number are its attributes); the trace id, for the agent's log
        lines."""
        trace_id = Tracing.inject_task(span, frame)
        if attempt > 1:
            span.add_event(
                "ether.retried",
                {
                    "ether.pid": replica.pid,
                    "ether.replica": replica.index,
                    "ether.attempt": attempt,
                },
            )
        return trace_id
