"""Cancelling tasks: CancelTask's ``cancel``, and a task given up on its agent (its caller went
away, or its deadline passed) handed to a watcher that restarts the agent when it ignores the
``cancel`` frame.

A part of ``Dispatcher`` (dispatch.py), apart from the way a task runs: CancelTask finds the task
by its id and cancels its owner (or calls back the batch that sent it), and the watcher outlives
the caller, in the dispatcher's own task group. What it reads of the dispatcher is declared
below and set by ``Dispatcher.__init__``.
"""

from __future__ import annotations

import time

import anyio

from ether_host.agents.running import RunningTask
from ether_host.background import start_detached
from ether_host.errors import NotFound
from ether_host.link import AgentConnection, Pending
from ether_host.reasons import Reason
from ether_host.supervisor import Replica


class TaskCancellation:
    """The dispatcher's cancels: CancelTask's, and the watch over a task its caller gave up."""

    # The dispatcher's, set by Dispatcher.__init__ (dispatch.py).
    _running: dict[str, RunningTask]
    _tg: anyio.abc.TaskGroup | None

    def cancel(self, task_id: str, reason: str) -> None:
        record = self._running.get(task_id)
        if record is None:
            raise NotFound(
                f"no running task {task_id!r} (it may have finished already)",
                reason=Reason.TASK_NOT_FOUND,
                resource=("task", task_id),
            )
        if record.cancel_reason or (record.owner is None and record.on_cancel is None):
            return  # already being cancelled
        record.cancel_reason = reason or "cancelled by CancelTask"
        if record.on_cancel is not None:
            record.on_cancel(record.cancel_reason)
        elif record.owner is not None:
            record.owner.cancel()

    def _abandon(
        self, connection: AgentConnection, replica: Replica, pending: Pending, reason: str
    ) -> bool:
        """Send a cancel frame and hand the task's slot to a watcher; True when handed over.

        The watcher runs in the dispatcher's own task group, not in the RPC's
        task: the caller may be gone (gRPC cancels the handler at the client's
        deadline), yet a task that ignores its cancel must still be noticed.
        """
        if pending.finished or not pending.sent or self._tg is None:
            return False  # answered, or never sent: nothing runs on the agent
        # The caller is gone: late progress and log frames have nobody to go to.
        pending.on_progress = pending.on_log = None
        start_detached(self._tg, self._watch_cancelled, connection, replica, pending, reason)
        return True

    async def _watch_cancelled(
        self, connection: AgentConnection, replica: Replica, pending: Pending, reason: str
    ) -> None:
        grace = replica.agent.spec.cancel_grace
        try:
            await connection.cancel(pending.frame_id, reason)
            answered = await pending.wait(time.monotonic() + grace)
            if not answered and replica.connection is connection:
                replica.mark_wedged(f"task {pending.frame_id} ignored its cancel for {grace:g}s")
        finally:
            connection.forget(pending.frame_id)
            replica.agent.release(replica)
