"""What a session's Converse stream carries, in domain terms (the transport encodes it)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ether_host.gateway.context import Change

# Event kinds; each names the ConverseResponse field it becomes.
ACCEPTED = "accepted"
REPLY = "reply"
CONTEXT_CHANGED = "context_changed"
PROGRESS = "progress"
ERROR = "error"
FAILOVER = "agent_failover"
CUSTOM = "custom"
STEP_COMPLETED = "step_completed"
TURN_COMPLETED = "turn_completed"
SESSION_CLOSED = "session_closed"


@dataclass(frozen=True)
class SessionEvent:
    """One event of a session; ``data`` holds the fields of the matching proto message.

    For ``context_changed`` it is the :class:`~ether_host.gateway.context.Change`.
    """

    kind: str
    turn: int
    data: Any
    time: float = field(default_factory=time.time)


def error_data(
    step: str,
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    retryable: bool = False,
) -> dict[str, Any]:
    """The data of an ``error`` event: the step (empty for the whole turn) and a TaskError."""
    return {
        "step": step,
        "code": code,
        "message": message,
        "details": details or {},
        "retryable": retryable,
    }


def event_record(event: SessionEvent) -> dict[str, Any]:
    """The event as plain JSON values, for the store."""
    data = event.data
    if event.kind == CONTEXT_CHANGED:
        data = {
            "version": data.version,
            "keys": list(data.keys),
            "values": data.values,
            "author": data.author,
            "time": data.time,
        }
    return {"kind": event.kind, "turn": event.turn, "data": data, "time": event.time}


def event_from(record: dict[str, Any]) -> SessionEvent:
    """An event read back from the store."""
    data = record["data"]
    if record["kind"] == CONTEXT_CHANGED:
        data = Change(
            int(data["version"]),
            tuple(data["keys"]),
            data["values"],
            data["author"],
            float(data["time"]),
        )
    return SessionEvent(record["kind"], int(record["turn"]), data, float(record["time"]))
