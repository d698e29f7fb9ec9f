"""Host calls: an agent's ``call`` frame, checked against what its agent may call and routed
to the feature that serves the method (``agent.*``, ``ctx.*``, ``term.*``, ``msg.*``, ...)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ether_host.agents.model import TaskInput
from ether_host.errors import EtherError
from ether_host.link import AgentConnection, TaskFailure
from ether_host.supervisor import Supervisor
from ether_host.telemetry import Tracing

if TYPE_CHECKING:
    from ether_host.agents.running import RunningTask

# A feature's host-call handler: (the calling task, method, params) -> JSON result.
CallHandler = Callable[["RunningTask", str, dict[str, Any]], Awaitable[Any]]
# The running task that sent frame ``task_id`` on ``connection``, if any.
CallerLookup = Callable[[AgentConnection, str], "RunningTask | None"]

# How a host-side error reads in the agent's error reply.
_REPLY_CODES = {
    "NOT_FOUND": "not_found",
    "INVALID_ARGUMENT": "invalid_params",
    "DEADLINE_EXCEEDED": "timeout",
    "UNAVAILABLE": "agent_crashed",
    "RESOURCE_EXHAUSTED": "overloaded",
    "CANCELLED": "cancelled",
    "FAILED_PRECONDITION": "not_ready",
    "PERMISSION_DENIED": "permission_denied",
}


class HostCalls:
    """The table of host-call methods and the checks every call passes first."""

    def __init__(
        self, supervisor: Supervisor, caller_of: CallerLookup, tracing: Tracing | None = None
    ) -> None:
        self._supervisor = supervisor
        self._caller_of = caller_of
        self._tracing = tracing
        self._handlers: dict[str, CallHandler] = {}

    def register(self, method_or_prefix: str, handler: CallHandler) -> None:
        """Serve ``method`` (or every ``prefix.*`` method) for agents that may call it."""
        self._handlers[method_or_prefix] = handler

    async def handle(self, connection: AgentConnection, frame: dict[str, Any]) -> Any:
        """Answer an agent's ``call`` frame; raises TaskFailure for an error reply."""
        method = str(frame.get("method") or "")
        caller = self._caller_of(connection, str(frame.get("task_id") or ""))
        if caller is None:
            raise TaskFailure(
                "invalid_request", f"call {method!r} names no running task of this agent"
            )
        agent = self._supervisor.get(caller.agent)
        if not agent.may_call(method):
            raise TaskFailure(
                "permission_denied",
                f"agent {agent.name} may not call {method!r}; allowed: {sorted(agent.allowed_calls)}",
            )
        handler = self._handlers.get(method) or self._handlers.get(method.split(".", 1)[0] + ".*")
        if handler is None:
            raise TaskFailure("method_not_found", f"this host serves no {method!r} calls yet")
        params = frame.get("params") or {}
        if not isinstance(params, dict):
            raise TaskFailure("invalid_params", "call params must be a JSON object")
        try:
            if caller.span is None or self._tracing is None:
                return await handler(caller, method, params)
            return await self._traced(handler, caller, method, params, frame)
        except EtherError as error:
            raise TaskFailure(
                _REPLY_CODES.get(error.code.value, "internal"), error.message
            ) from None

    async def _traced(
        self,
        handler: CallHandler,
        caller: RunningTask,
        method: str,
        params: dict[str, Any],
        frame: dict[str, Any],
    ) -> Any:
        """Serve the call inside a span named after its method, current while it runs: a task
        it starts (``agent.call``) is its child. Its parent is the agent's own span when the
        call frame carries a ``traceparent``, else the calling task's span."""
        assert self._tracing is not None
        attributes = {"ether.method": method, "ether.caller": caller.agent}
        if method == "agent.call":
            attributes["ether.call.agent"] = str(params.get("agent") or "")
            attributes["ether.call.action"] = str(params.get("action") or "")
        with self._tracing.span(
            method, attributes, parent=Tracing.parent_of(frame, caller.span)
        ) as span:
            self._tracing.payload(span, "ether.params", params)
            return await handler(caller, method, params)


def child_task(caller: RunningTask, params: dict[str, Any], max_depth: int) -> TaskInput:
    """The task an ``agent.call`` of ``caller`` asks for: checked against the caller's depth,
    task count and cost budget (a TaskFailure for the agent when one is used up), and counted
    against them. It inherits the caller's deadline, session, run and what is left of its cost
    budget; its id extends the caller's."""
    parent = caller.task
    if parent.depth + 1 > max_depth:
        raise TaskFailure("depth_exceeded", f"agent.call deeper than {max_depth} levels refused")
    if parent.budget.max_tasks is not None and caller.children >= parent.budget.max_tasks:
        raise TaskFailure("budget_exceeded", f"budget.max_tasks {parent.budget.max_tasks} used up")
    remaining_cost = caller.remaining_cost()
    if remaining_cost is not None and remaining_cost <= 0:
        raise TaskFailure("budget_exceeded", "budget.max_cost used up by earlier calls")
    child_params = params.get("params") or {}
    if not isinstance(child_params, dict):
        raise TaskFailure("invalid_params", "agent.call params.params must be a JSON object")
    child = TaskInput(
        agent=str(params.get("agent") or ""),
        action=str(params.get("action") or ""),
        params=child_params,
        parent_task=parent.task_id,
        root_task=parent.root_task or parent.task_id,
        depth=parent.depth + 1,
        lineage=(*parent.lineage, caller.agent),
        workflow=parent.workflow,
        session_id=parent.session_id,
        deadline=caller.deadline,
        task_id=f"{parent.task_id}.{caller.children + 1}"[:128],
        force_refresh=params.get("force_refresh") is True,
    )
    child.budget.max_cost = remaining_cost
    caller.children += 1
    return child
