"""The dispatcher's way to other hosts (docs/cluster.md, "Tasks across hosts").

The dispatcher holds one of these when the host is in a cluster (``cluster/`` implements it) and
None otherwise: it asks only when this host does not run the task's agent, so a single host, and
a call to an agent this host runs, pay nothing for the cluster. A Protocol here rather than an
import of ``cluster/``, which imports the dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ether_host.agents.model import TaskEvent, TaskInput, TaskResult


class OtherHosts(Protocol):
    async def execute_elsewhere(
        self, task: TaskInput, on_event: Callable[[TaskEvent], None] | None
    ) -> TaskResult:
        """Run ``task`` on another host that runs its agent: its result, with its ``started``,
        ``progress`` and ``log`` events to ``on_event`` in order; or the EtherError that ended it
        (NotFound when no host of the cluster runs the agent)."""
        ...

    def idempotent_elsewhere(self, agent: str, action: str) -> bool:
        """Whether a host that runs ``agent`` declares ``action`` idempotent (as the directory
        was last read: a workflow's retry policy asks before each of its tasks)."""
        ...

    async def actions_elsewhere(self) -> dict[str, list[str]]:
        """The agents only other hosts run, each with its actions' names (what a workflow's
        stages are checked against, besides this host's agents)."""
        ...
