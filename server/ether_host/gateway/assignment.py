"""Which gateway agent serves a session: chosen when it opens, replaced when it fails.

A session is served by one agent of kind ``io_gateway``: the one named, or the least loaded
healthy one (fewest open sessions per ready replica, then fewest tasks in flight) among those
offering the capability asked for. When the serving agent is not healthy at the start of a
turn, or dies during one, another healthy candidate takes over and the session's stream says
so (``agent_failover``).

In a cluster the candidates include the gateway agents only other hosts run, as the directory
said when last read (``refresh``, before a session opens and before each reply): a turn
reaches such an agent through the dispatcher, on any host that runs it, so an agent still
RUNNING on some host keeps its sessions when one of its hosts goes; this host's own agents are
preferred, as the dispatcher prefers local replicas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import structlog

from ether_host.errors import FieldViolation, InvalidArgument, NotFound, Unavailable
from ether_host.gateway import events as ev
from ether_host.gateway.elsewhere import GatewayAgentElsewhere, OtherGateways
from ether_host.reasons import Reason
from ether_host.supervisor import ManagedAgent, State, Supervisor

if TYPE_CHECKING:
    from ether_host.gateway.session import Session

log = structlog.get_logger("ether.gateway")

COMING_BACK = (State.BACKOFF, State.STARTING, State.INSTALLING)


def healthy(agent: ManagedAgent) -> bool:
    return agent.state is State.RUNNING and agent.ready_replicas > 0


def _why(agent: ManagedAgent | None) -> str:
    return "agent_removed" if agent is None else f"agent_{agent.state.value.lower()}"


class GatewayAgents:
    """The gateway agents of this host (and, in a cluster, of the others) serving sessions."""

    def __init__(self, supervisor: Supervisor, sessions: Mapping[str, Session]) -> None:
        self.supervisor = supervisor
        self._sessions = sessions
        self.elsewhere: OtherGateways | None = None
        self._elsewhere: dict[str, GatewayAgentElsewhere] = {}  # healthy ones, as last read
        # Every agent only other hosts run, with its actions: what pipeline steps may name.
        self.actions_elsewhere: dict[str, list[str]] = {}

    async def refresh(self, actions: bool = False) -> None:
        """Read again which gateway agents other hosts run, and with ``actions`` which agents
        with which actions (nothing to do on one host)."""
        if self.elsewhere is not None:
            if actions:
                self.actions_elsewhere = await self.elsewhere.actions_elsewhere()
            found = await self.elsewhere.gateway_agents()
            self._elsewhere = {
                a.name: a for a in found if a.healthy and a.name not in self.supervisor.agents
            }

    def gateway_agents(self, capability: str = "") -> list[ManagedAgent]:
        return [
            a
            for a in self.supervisor.agents.values()
            if a.spec.kind == "io_gateway" and (not capability or capability in a.capability_tags)
        ]

    def _elsewhere_offering(self, capability: str) -> list[GatewayAgentElsewhere]:
        return [
            a for a in self._elsewhere.values() if not capability or capability in a.capabilities
        ]

    def load(self, agent: ManagedAgent) -> tuple[float, int, str]:
        serving = sum(1 for s in self._sessions.values() if s.is_open and s.agent == agent.name)
        return serving / max(1, agent.ready_replicas), agent.in_flight + agent.queued, agent.name

    def pick(self, capability: str, exclude: set[str] | None = None) -> str | None:
        """The least loaded healthy gateway agent offering ``capability`` (any when empty):
        this host's first, then one only other hosts run."""
        skip = exclude or set()
        here = [a for a in self.gateway_agents(capability) if healthy(a) and a.name not in skip]
        if here:
            return min(here, key=self.load).name
        there = [a for a in self._elsewhere_offering(capability) if a.name not in skip]
        return min(there, key=lambda a: (a.in_flight, a.name)).name if there else None

    def assign(self, agent_name: str, capability: str) -> str:
        """The agent to serve a new session (the one named, or one picked); the error that
        says why there is none."""
        if agent_name:
            if agent_name in self._elsewhere and agent_name not in self.supervisor.agents:
                return agent_name
            agent = self.supervisor.get(agent_name)
            if agent.spec.kind != "io_gateway":
                raise InvalidArgument(
                    f"agent {agent_name} is of type {agent.spec.kind.upper()}, not IO_GATEWAY; "
                    'only gateway agents serve sessions (set type = "io_gateway" in its agent.toml)',
                    reason=Reason.NOT_A_GATEWAY_AGENT,
                    resource=("agent", agent_name),
                    violations=[FieldViolation("agent", "an agent of type AGENT_TYPE_IO_GATEWAY")],
                )
            if not healthy(agent):
                raise Unavailable(
                    f"gateway agent {agent_name} is {agent.state.value}, not RUNNING; retry shortly",
                    reason=Reason.NO_HEALTHY_AGENT,
                    resource=("agent", agent_name),
                    retry_after=1.0,
                )
            return agent_name
        if not self.gateway_agents(capability) and not self._elsewhere_offering(capability):
            what = f"offering capability {capability!r}" if capability else "at all"
            raise NotFound(
                f"no agent of type IO_GATEWAY is deployed {what}",
                reason=Reason.NO_GATEWAY_AGENT,
                resource=("capability", capability),
            )
        picked = self.pick(capability)
        if picked is None:
            raise Unavailable(
                "no gateway agent "
                + (f"offering {capability!r} " if capability else "")
                + "is healthy right now; retry shortly",
                reason=Reason.NO_HEALTHY_AGENT,
                retry_after=1.0,
            )
        return picked

    def serving_agent(self, session: Session, turn: int) -> str | None:
        """The healthy agent to serve this turn: the current one, or a replacement (with an event)."""
        current = self.supervisor.agents.get(session.agent)
        if current is not None and healthy(current):
            return session.agent
        if current is None and session.agent in self._elsewhere:
            return session.agent  # RUNNING on another host: the dispatcher takes the turn there
        replacement = self.fail_over(session, turn, _why(current), exclude={session.agent})
        if replacement is None and current is not None and current.state in COMING_BACK:
            return session.agent  # no one else, and it is restarting: the task waits for it
        return replacement

    def fail_over(self, session: Session, turn: int, reason: str, exclude: set[str]) -> str | None:
        replacement = self.pick(session.capability, exclude)
        if replacement is None:
            return None
        previous, session.agent = session.agent, replacement
        session.emit(
            ev.FAILOVER,
            turn,
            {"from_agent": previous, "to_agent": replacement, "reason": reason},
        )
        log.warning(
            "session failed over",
            session=session.id,
            from_agent=previous,
            to_agent=replacement,
            reason=reason,
        )
        return replacement
