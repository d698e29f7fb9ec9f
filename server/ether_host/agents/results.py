"""What an agent's answer to a task means: the TaskResult, the reported cost against the
budget, and whether the agent gave up at the task's deadline."""

from __future__ import annotations

import time
from typing import Any

from ether_host.agents.model import (
    ERROR,
    PARTIAL,
    SUCCESS,
    Budget,
    Metadata,
    TaskErrorInfo,
    TaskResult,
)
from ether_host.link import LinkClosed, Pending

# An agent that answers `timeout` this close to the task's deadline stopped for that deadline:
# it watches its own copy, which can fire a moment before the host's timer does.
DEADLINE_SLACK = 0.05
_STATUSES = {"ok": SUCCESS, "partial": PARTIAL}
_NOTHING: dict[str, Any] = {}  # an answer with no frame (read only)


def task_result(
    task_id: str,
    agent: str,
    action: str,
    pending: Pending,
    metadata: Metadata,
    budget: Budget,
    spent_cost: float,
) -> TaskResult:
    """The result of an answered task; raises LinkClosed when the process died instead.

    ``spent_cost`` is what the task's own child tasks reported: it counts against
    ``budget.max_cost`` together with the agent's reported cost.
    """
    if pending.failure is not None:
        if isinstance(pending.failure, LinkClosed):
            raise pending.failure
        code = getattr(pending.failure, "code", "internal")
        message = getattr(pending.failure, "message", str(pending.failure))
        return TaskResult(
            task_id, ERROR, agent, action, error=TaskErrorInfo(code, message), metadata=metadata
        )
    frame = pending.result or _NOTHING
    # Read only when the agent reported something: most answers carry no metadata, and
    # ``metadata`` holds the defaults (0 cost, no model, an empty extra) already.
    reported = frame.get("metadata")
    if reported:
        metadata.cost = float(reported.get("cost") or 0.0)
        metadata.model = str(reported.get("model") or "")
        extra = reported.get("extra")
        if extra:
            metadata.extra = dict(extra)
    metadata.cost += spent_cost
    status = frame.get("status")
    status = _STATUSES.get(status, ERROR) if type(status) is str else ERROR
    error = _error_of(frame.get("error")) if status != SUCCESS else None
    if status == ERROR and error is None:
        error = TaskErrorInfo("error", f"agent answered status {frame.get('status')!r}")
    data = frame.get("result")
    limit = budget.max_cost
    if limit is not None and metadata.cost > limit:
        status = PARTIAL if data is not None and status != ERROR else ERROR
        error = TaskErrorInfo(
            "budget_exceeded",
            f"reported cost {metadata.cost:g} exceeds budget.max_cost {limit:g}",
        )
    return TaskResult(
        task_id,
        status,
        agent,
        action,
        data=data,
        error=error,
        metadata=metadata,
        next_actions=list(proposed) if (proposed := frame.get("next_actions")) else [],
    )


def answered_its_deadline(pending: Pending, deadline: float | None) -> bool:
    """True when the agent gave up at the task's deadline: the caller gets DEADLINE_EXCEEDED,
    whichever side noticed first, not an ERROR output that depends on a race."""
    if deadline is None or pending.result is None:
        return False
    error = pending.result.get("error")
    timed_out = isinstance(error, dict) and error.get("code") == "timeout"
    return timed_out and time.monotonic() >= deadline - DEADLINE_SLACK


def _error_of(raw: Any) -> TaskErrorInfo | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return TaskErrorInfo("error", raw)
    if isinstance(raw, dict):
        details = raw.get("data") or raw.get("details") or {}
        return TaskErrorInfo(
            str(raw.get("code") or "error"),
            str(raw.get("message") or ""),
            details if isinstance(details, dict) else {"data": details},
            bool(raw.get("retryable")),
        )
    return TaskErrorInfo("error", str(raw))
