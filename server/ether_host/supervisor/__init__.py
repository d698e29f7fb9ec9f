"""The supervisor: agent folders in, supervised processes out."""

from ether_host.supervisor.agent import ActionInfo, ManagedAgent
from ether_host.supervisor.deployments import Supervisor
from ether_host.supervisor.manifest import AgentSpec
from ether_host.supervisor.records import LifecycleEvent, LogLine, State
from ether_host.supervisor.replica import Replica

__all__ = [
    "ActionInfo",
    "AgentSpec",
    "LifecycleEvent",
    "LogLine",
    "ManagedAgent",
    "Replica",
    "State",
    "Supervisor",
]
