"""What a deployed agent and its replicas use of the host, and nothing more.

``ManagedAgent`` and ``Replica`` are handed an ``AgentHost`` (the supervisor is one) instead of
reaching through ``replica.agent.supervisor``: the children registry that records and sweeps
their process groups, the control groups and rlimits of each process, the state directory, the
sandbox settings, the history lifecycle events go to, and who answers an agent's host calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ether_host.bus import History
    from ether_host.link import AgentConnection
    from ether_host.procs import ChildRegistry
    from ether_host.resources import Resources
    from ether_host.sandbox import SandboxSettings
    from ether_host.supervisor.records import LifecycleEvent


class AgentHost(Protocol):
    """The host as an agent's processes see it."""

    @property
    def children(self) -> ChildRegistry:
        """Records each process group an agent runs and sweeps the orphans."""

    @property
    def resources(self) -> Resources:
        """Each replica's control groups and rlimits."""

    @property
    def state_dir(self) -> Path:
        """Where installs, scratch directories and records live."""

    @property
    def sandbox(self) -> SandboxSettings:
        """The host config's [sandbox]."""

    @property
    def events(self) -> History[LifecycleEvent]:
        """Where lifecycle events go (WatchEvents follows it)."""

    async def handle_call(self, connection: AgentConnection, frame: dict[str, Any]) -> Any:
        """Answer one ``call`` frame of an agent."""
