"""A task for an agent this host does not run, sent to a host of the cluster that does
(``other_hosts``, agents/other_hosts.py): the caller's side of it, held here as a local task is.

A part of ``Dispatcher`` (dispatch.py), apart because such a task takes no slot, sends no frame
and makes no attempt here: the cluster runs it (docs/cluster.md, "Tasks across hosts"), and a
single host never comes here. What it reads of the dispatcher is declared below and set by
``Dispatcher.__init__``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ether_host.agents.model import TaskInput, TaskResult
from ether_host.agents.other_hosts import OtherHosts
from ether_host.agents.running import EventSink, RunningTask, cancel_outcome, status_of
from ether_host.telemetry import Tracing


class RemoteExecution:
    """The dispatcher's tasks run on other hosts, each held in ``_running`` until it ends."""

    # The dispatcher's, set by Dispatcher.__init__ (dispatch.py).
    tracing: Tracing | None
    remote_task_ended: Callable[[str, str, float], None] | None
    _running: dict[str, RunningTask]

    if TYPE_CHECKING:  # the dispatcher's own (dispatch.py)

        def _admit(self, task: TaskInput, from_cluster: bool = False) -> RunningTask | None: ...

    async def _execute_elsewhere(
        self, task: TaskInput, other_hosts: OtherHosts, on_event: EventSink | None
    ) -> TaskResult:
        """Run a task for an agent this host does not run on a host that does. Held in
        ``_running`` as a local task is, so CancelTask here cancels it there."""
        self._admit(task)
        task.root_task = task.root_task or task.task_id
        record = RunningTask(task, agent=task.agent, deadline=task.deadline, remote=True)
        record.owner = asyncio.current_task()
        tracing = self.tracing
        if tracing is not None:  # the caller's side of the task; the host running it continues it
            record.span = tracing.start_task(
                task.task_id, task.agent, task.action, task.params, remote=True
            )
            carried: dict[str, Any] = {}
            tracing.inject(record.span, carried)
            task.traceparent = carried.get("traceparent", "")
            task.tracestate = carried.get("tracestate", "")
        result: TaskResult | None = None
        raised: BaseException | None = None
        began = time.perf_counter()
        self._running[task.task_id] = record
        try:
            result = await other_hosts.execute_elsewhere(task, on_event)
            return result
        except asyncio.CancelledError as error:
            raised = cancel_outcome(record, error)
            if raised is error:
                raise
            raise raised from None
        except BaseException as error:
            raised = error
            raise
        finally:
            self._running.pop(task.task_id, None)
            if record.span is not None and tracing is not None:
                tracing.end_task(record.span, result, raised)
            if self.remote_task_ended is not None:
                status = result.status if result is not None else status_of(raised)
                self.remote_task_ended(task.agent, status, time.perf_counter() - began)
