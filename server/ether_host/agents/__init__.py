"""The task contract: the directory of agents and the dispatch of tasks to them."""

from ether_host.agents.dispatch import Dispatcher, RunningTask
from ether_host.agents.model import (
    ERROR,
    PARTIAL,
    SUCCESS,
    Budget,
    Metadata,
    TaskErrorInfo,
    TaskEvent,
    TaskInput,
    TaskResult,
)

__all__ = [
    "ERROR",
    "PARTIAL",
    "SUCCESS",
    "Budget",
    "Dispatcher",
    "Metadata",
    "RunningTask",
    "TaskErrorInfo",
    "TaskEvent",
    "TaskInput",
    "TaskResult",
]
