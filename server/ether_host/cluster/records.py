"""What one host publishes about itself in the cluster directory, and how it reads back.

A host's entry is one JSON value in Redis under ``ether:host:<name>``, written at every heartbeat
with a time to live of ``dropout`` seconds: Redis's own clock expires the entry of a host that
stopped, so no host has to judge another's clock. JSON rather than a Redis hash: the entry is
written and read whole, and a reader never sees half of one heartbeat and half of the next.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from ether_host.supervisor import ManagedAgent

KEY_PREFIX = "ether:"
HOSTS_KEY = KEY_PREFIX + "hosts"  # a set of host names; a name whose entry expired is removed


def host_key(name: str) -> str:
    return f"{KEY_PREFIX}host:{name}"


@dataclass(frozen=True)
class ActionSummary:
    """An action as another host lists it (its schemas stay with the host that runs it)."""

    name: str
    description: str = ""
    idempotent: bool = False
    cache_ttl: float = 0.0  # seconds; 0: its results are not cached (absent from older hosts)


@dataclass(frozen=True)
class PublishedAgent:
    """One agent of one host, as the directory holds it: what ListAgents shows, and its load."""

    name: str
    kind: str
    language: str
    version: str
    description: str
    capabilities: tuple[str, ...]
    actions: tuple[ActionSummary, ...]
    state: str  # a supervisor State's value ("RUNNING", ...)
    replicas: int
    ready_replicas: int
    in_flight: int
    queued: int
    max_concurrency: int

    @classmethod
    def of(cls, agent: ManagedAgent) -> PublishedAgent:
        return cls(
            name=agent.name,
            kind=agent.spec.kind,
            language=agent.spec.language,
            version=agent.version,
            description=agent.description,
            capabilities=tuple(agent.capability_tags),
            actions=tuple(
                ActionSummary(a.name, a.description, a.idempotent, a.cache_ttl)
                for a in agent.actions
            ),
            state=agent.state.value,
            replicas=agent.spec.replicas,
            ready_replicas=agent.ready_replicas,
            in_flight=agent.in_flight,
            queued=agent.queued,
            max_concurrency=agent.max_concurrency,
        )

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> PublishedAgent:
        fields = dict(value)
        fields["capabilities"] = tuple(fields.get("capabilities", ()))
        fields["actions"] = tuple(ActionSummary(**a) for a in fields.get("actions", ()))
        return cls(**fields)

    def shape(self) -> tuple[str, str, int, int]:
        """What changes when the agent is deployed, scaled, started or stopped (not its load):
        a change of shape is published at once and logged."""
        return (self.name, self.state, self.replicas, self.ready_replicas)


@dataclass(frozen=True)
class HostEntry:
    """One host of the cluster: its name, the gRPC address others reach it at, its agents."""

    name: str
    address: str
    instance: str  # this process's random id: tells a restarted host from a live namesake
    agents: tuple[PublishedAgent, ...] = field(default=())
    # The other hosts this one could not reach at their advertised address (reachability.py).
    unreachable: tuple[str, ...] = ()

    def encode(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def decode(cls, raw: bytes | str) -> HostEntry | None:
        """The entry, or None for a value this version cannot read (logged by the caller)."""
        try:
            value = orjson.loads(raw)
            return cls(
                name=str(value["name"]),
                address=str(value["address"]),
                instance=str(value["instance"]),
                agents=tuple(PublishedAgent.from_json(a) for a in value.get("agents", ())),
                unreachable=tuple(str(n) for n in value.get("unreachable", ())),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
