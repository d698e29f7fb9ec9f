"""Which failed tasks run again: only idempotent actions, and only for retryable failures."""

from __future__ import annotations

from ether_host.agents import OtherHosts, TaskResult
from ether_host.supervisor import Supervisor
from ether_host.workflows.model import TaskRecord
from ether_host.workflows.spec import RetrySpec

# Dispatcher errors that say "try again later" rather than "this task is wrong".
RETRYABLE_CODES = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"}


def idempotent(
    supervisor: Supervisor, task: TaskRecord, other_hosts: OtherHosts | None = None
) -> bool:
    """True when the task's action is declared idempotent (an unknown agent's is not), by this
    host's agent or, for an agent only other hosts of the cluster run, by theirs."""
    agent = supervisor.agents.get(task.agent)
    if agent is None:
        return other_hosts is not None and other_hosts.idempotent_elsewhere(task.agent, task.action)
    return any(a.name == task.action and a.idempotent for a in agent.actions)


def retryable(result: TaskResult, retry: RetrySpec) -> bool:
    """Whether the policy lets this failure be tried again (attempts left aside)."""
    error = result.error
    if error is None:
        return not retry.retryable_only
    # A cancel or an exhausted budget says stop; params that break the action's schema fail
    # the same way however often they are sent (each attempt would count against max_tasks).
    if error.code in ("cancelled", "budget_exceeded", "invalid_params"):
        return False
    return error.retryable or not retry.retryable_only
