"""Host calls: an agent's ``call`` frame, checked against what its agent may call and routed
to the feature that serves the method (``agent.*``, ``ctx.*``, ``term.*``, ``msg.*``, ...)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ether_host.errors import EtherError
from ether_host.link import AgentConnection, TaskFailure
from ether_host.supervisor import Supervisor
from ether_host.telemetry import Tracing

if TYPE_CHECKING:
    from ether_host.agents.dispatch import RunningTask

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
