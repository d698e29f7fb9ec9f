"""The task contract: the directory of agents and the dispatch of tasks to them."""

from ether_host.agents.dispatch import Dispatcher  # isort: skip (batch needs it)
from ether_host.agents.batch import SentBatches
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
from ether_host.agents.other_hosts import OtherHosts
from ether_host.agents.pipe import DEFAULT_IN_FLIGHT as PIPE_DEFAULT_IN_FLIGHT
from ether_host.agents.pipe import MAX_IN_FLIGHT as PIPE_MAX_IN_FLIGHT
from ether_host.agents.pipe import in_flight_limit, run_pipe
from ether_host.agents.result_cache import MemoryResultCache, ResultCache
from ether_host.agents.running import RunningTask, new_task_id

__all__ = [
    "ERROR",
    "PARTIAL",
    "PIPE_DEFAULT_IN_FLIGHT",
    "PIPE_MAX_IN_FLIGHT",
    "SUCCESS",
    "Budget",
    "Dispatcher",
    "MemoryResultCache",
    "Metadata",
    "OtherHosts",
    "ResultCache",
    "RunningTask",
    "SentBatches",
    "TaskErrorInfo",
    "TaskEvent",
    "TaskInput",
    "TaskResult",
    "in_flight_limit",
    "new_task_id",
    "run_pipe",
]
