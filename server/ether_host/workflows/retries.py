"""Which failed tasks run again: only idempotent actions, and only for retryable failures."""

from __future__ import annotations

from ether_host.agents import TaskResult
from ether_host.supervisor import Supervisor
from ether_host.workflows.model import TaskRecord
from ether_host.workflows.spec import RetrySpec

# Dispatcher errors that say "try again later" rather than "this task is wrong".
RETRYABLE_CODES = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"}


def idempotent(supervisor: Supervisor, task: TaskRecord) -> bool:
    """True when the task's action is declared idempotent (an unknown agent's is not)."""
    agent = supervisor.agents.get(task.agent)
    return agent is not None and any(a.name == task.action and a.idempotent for a in agent.actions)


def retryable(result: TaskResult, retry: RetrySpec) -> bool:
    """Whether the policy lets this failure be tried again (attempts left aside)."""
    error = result.error
    if error is None:
        return not retry.retryable_only
    if error.code in ("cancelled", "budget_exceeded"):
        return False
    return error.retryable or not retry.retryable_only
