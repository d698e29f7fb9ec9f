"""What the host's health says, from the supervisor's events: which agents can take a task
(at least one replica RUNNING), whether any can, and whether the host is ready.

The core's side only: ``AgentHealth`` follows ``Supervisor.events`` and tells a ``HealthSink``
each change; the composition root wires a sink that speaks ``grpc.health.v1``
(``transport/health.py``). ``readiness`` is what the HTTP listener's ``/readyz`` answers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import anyio
import structlog
from anyio.abc import TaskStatus

from ether_host.cluster import Cluster
from ether_host.lifecycle import Lifecycle
from ether_host.supervisor import ManagedAgent, State, Supervisor

log = structlog.get_logger("ether.health")


class HealthSink(Protocol):
    """Where health changes go (the gRPC health service, in the host)."""

    async def agent_changed(self, name: str, serving: bool | None) -> None:
        """``name`` can take tasks (True), cannot (False), or is no longer deployed (None)."""

    async def any_changed(self, serving: bool) -> None:
        """Some agent can take tasks (True), or none can (False)."""


def serving(agent: ManagedAgent) -> bool:
    """An agent serves while at least one of its replicas is RUNNING."""
    return any(replica.state is State.RUNNING for replica in agent.replicas)


class AgentHealth:
    """Keeps a ``HealthSink`` told which agents serve, following the supervisor's events (no
    polling): each event names an agent, whose replicas are then looked at as they are now, so
    a burst of events, or events that fell out of the history before they were read, still end
    on the right answer."""

    def __init__(self, supervisor: Supervisor, lifecycle: Lifecycle, sink: HealthSink) -> None:
        self._supervisor = supervisor
        self._lifecycle = lifecycle
        self._sink = sink
        self._known: dict[str, bool] = {}  # what the sink was last told, per agent
        self._any: bool | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Tell the sink how every agent is now, then every change until the host stops."""
        events = self._supervisor.events
        cursor = events.last_sequence
        await self._look_at(list(self._supervisor.agents))
        task_status.started()
        async for sequence, event in events.follow(
            cursor, until=lambda: self._lifecycle.is_stopping
        ):
            if sequence != cursor + 1:  # some fell out of the history unread: look at all
                await self._look_at([*self._known, *self._supervisor.agents])
            else:
                await self._look_at([event.agent])
            cursor = sequence

    async def _look_at(self, names: list[str]) -> None:
        for name in dict.fromkeys(names):
            agent = self._supervisor.agents.get(name)
            now = None if agent is None else serving(agent)
            if now is None:
                if self._known.pop(name, None) is None:
                    continue
            elif self._known.get(name) == now:
                continue
            else:
                self._known[name] = now
            log.info("agent health", agent=name, serving=now)
            await self._sink.agent_changed(name, now)
        any_serving = any(self._known.values())
        if any_serving != self._any:
            self._any = any_serving
            await self._sink.any_changed(any_serving)


@dataclass(frozen=True)
class Readiness:
    """Whether the host is ready for traffic, and why not."""

    ready: bool
    reason: str
    waiting_for: tuple[str, ...] = ()
    # Why the host is cut off from its cluster (docs/cluster.md); it stays ready: it serves its
    # own agents, and taking it out of rotation would not bring Redis back.
    degraded: str = ""


def readiness(
    supervisor: Supervisor, lifecycle: Lifecycle, cluster: Cluster | None = None
) -> Readiness:
    """``_readiness``, with the cluster's degraded reason when the host is in one."""
    found = _readiness(supervisor, lifecycle)
    if cluster is None:
        return found
    return replace(found, degraded=cluster.status().degraded)


def _readiness(supervisor: Supervisor, lifecycle: Lifecycle) -> Readiness:
    """Ready once the host serves, until it begins to stop, while every agent of its config
    (``[[agents]]`` and ``agents_dir``, less those StopAgent stopped) has a RUNNING replica: a
    config agent that cannot run keeps the host out of rotation, so a rollout of a broken
    config stops at the first host instead of replacing working ones."""
    if lifecycle.is_stopping:
        return Readiness(False, "the host is stopping")
    if lifecycle.info is None:
        return Readiness(False, "the host is starting")
    waiting = tuple(
        name
        for name in supervisor.configured_to_run()
        if (agent := supervisor.agents.get(name)) is None or not serving(agent)
    )
    if waiting:
        return Readiness(
            False, "config agents without a RUNNING replica: " + ", ".join(waiting), waiting
        )
    return Readiness(True, "")
