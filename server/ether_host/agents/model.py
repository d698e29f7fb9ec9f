"""The task contract in domain terms (the transport converts to and from protobuf)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

SUCCESS, ERROR, PARTIAL = "SUCCESS", "ERROR", "PARTIAL"


@dataclass(slots=True)
class Budget:
    """Limits of a task; None means no limit of that kind."""

    max_cost: float | None = None
    max_time: float | None = None  # seconds
    max_iterations: int | None = None
    max_tasks: int | None = None


@dataclass(slots=True)
class TaskInput:
    """One task for one agent, as the dispatcher sees it."""

    agent: str
    action: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    task_id: str = ""
    budget: Budget = field(default_factory=Budget)
    parent_task: str = ""
    workflow: str = ""
    session_id: str = ""
    permissions: list[str] = field(default_factory=list)
    idempotent: bool | None = None
    # Run even when the result cache holds an answer, and keep the new one (agents/result_cache.py).
    force_refresh: bool = False
    deadline: float | None = None  # absolute, time.monotonic()
    # Set by the host for sub-agent calls.
    root_task: str = ""
    depth: int = 0
    lineage: tuple[str, ...] = ()  # agents of the ancestor tasks, root first
    # W3C trace context of the caller's task span on another host (cluster/remote.py): the
    # span this task's span continues there. Empty for a task that starts on this host.
    traceparent: str = ""
    tracestate: str = ""


@dataclass(slots=True)
class TaskErrorInfo:
    """Why a task failed."""

    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    retryable: bool = False


@dataclass(slots=True)
class Metadata:
    """Provenance: what the host measured plus what the agent reported."""

    duration: float = 0.0
    cost: float = 0.0
    model: str = ""
    started_at: float = field(default_factory=time.time)
    host: str = ""
    pid: int = 0
    attempt: int = 1
    cached: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class TaskResult:
    """The output of one task."""

    task_id: str
    status: str
    agent: str
    action: str
    data: Any = None
    error: TaskErrorInfo | None = None
    metadata: Metadata = field(default_factory=Metadata)
    next_actions: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The result as plain JSON (the AgentOutput shape), for host-call replies."""
        out: dict[str, Any] = {
            "task_id": self.task_id,
            "status": self.status,
            "agent": self.agent,
            "action": self.action,
            "data": self.data,
            "metadata": {
                "duration_ms": round(self.metadata.duration * 1000, 3),
                "cost": self.metadata.cost,
                "model": self.metadata.model,
                "pid": self.metadata.pid,
                "attempt": self.metadata.attempt,
                "cached": self.metadata.cached,
            },
            "next_actions": self.next_actions,
        }
        if self.error is not None:
            out["error"] = {
                "code": self.error.code,
                "message": self.error.message,
                "details": self.error.details,
                "retryable": self.error.retryable,
            }
        return out


@dataclass(frozen=True)
class TaskEvent:
    """Something that happened to a running task: started, progress or log."""

    kind: str  # "started" | "progress" | "log"
    payload: dict[str, Any]
    time: float = field(default_factory=time.time)
