"""Records the supervisor publishes: lifecycle events and log lines."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class State(Enum):
    """Lifecycle states, as SupervisorService shows them."""

    INSTALLING = "INSTALLING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    BACKOFF = "BACKOFF"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    EXITED = "EXITED"
    FATAL = "FATAL"


@dataclass(frozen=True)
class LifecycleEvent:
    """One state change of an agent (replica -1) or one of its replicas."""

    agent: str
    replica: int
    state: State
    previous: State
    reason: str
    pid: int = 0
    exit_code: int | None = None
    signal: int | None = None
    stderr_tail: tuple[str, ...] = ()
    time: float = field(default_factory=time.time)


@dataclass(frozen=True)
class LogLine:
    """One line of an agent's log: stderr, a log frame, or install output."""

    agent: str
    replica: int
    pid: int
    source: str  # "stderr" | "log" | "install"
    level: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)
