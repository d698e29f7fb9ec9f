"""The cluster as ListAgents and GetAgent show it: this host's agents, live, and every other
host's, as the directory last said."""

from __future__ import annotations

from dataclasses import dataclass

from ether_host.cluster.records import HostEntry, PublishedAgent
from ether_host.errors import NotFound
from ether_host.paging import Page, paginate
from ether_host.reasons import Reason
from ether_host.supervisor import ManagedAgent, State, Supervisor


@dataclass(frozen=True)
class AgentOnHost:
    """One host that runs an agent, with the agent's state and load there."""

    host: str
    address: str
    state: str
    replicas: int
    ready_replicas: int
    in_flight: int
    queued: int
    local: bool  # the host answering


# A state that can take tasks first, then the rest in the supervisor's order of concern.
_BEST_FIRST = [State.RUNNING.value, State.STARTING.value, State.INSTALLING.value]


def _on_host(entry: HostEntry, agent: PublishedAgent, local: bool) -> AgentOnHost:
    return AgentOnHost(
        host=entry.name,
        address=entry.address,
        state=agent.state,
        replicas=agent.replicas,
        ready_replicas=agent.ready_replicas,
        in_flight=agent.in_flight,
        queued=agent.queued,
        local=local,
    )


@dataclass(frozen=True)
class RemoteAgent:
    """An agent no replica of this host runs: how one of its hosts describes it, and its hosts."""

    info: PublishedAgent
    hosts: tuple[AgentOnHost, ...]

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def state(self) -> str:
        """The best state over its hosts: RUNNING when any host can take a task."""
        states = [h.state for h in self.hosts]
        return next((s for s in _BEST_FIRST if s in states), states[0])


def _matches(
    agent: ManagedAgent | PublishedAgent, capability: str, language: str, kind: str
) -> bool:
    if isinstance(agent, ManagedAgent):
        tags, actions = agent.capability_tags, [a.name for a in agent.actions]
        agent_language, agent_kind = agent.spec.language, agent.spec.kind
    else:
        tags, actions = list(agent.capabilities), [a.name for a in agent.actions]
        agent_language, agent_kind = agent.language, agent.kind
    return (
        (not capability or capability in tags or capability in actions)
        and (not language or agent_language == language)
        and (not kind or agent_kind == kind)
    )


class ClusterView:
    """One reading of the directory (the other hosts' entries) joined with this host's agents."""

    def __init__(self, supervisor: Supervisor, this: HostEntry, peers: list[HostEntry]) -> None:
        self._supervisor = supervisor
        self._this = this
        self._peers = sorted(peers, key=lambda p: p.name)
        self._index: dict[str, list[tuple[HostEntry, PublishedAgent]]] | None = None

    def _elsewhere(self) -> dict[str, list[tuple[HostEntry, PublishedAgent]]]:
        """Each agent the other hosts run, with those hosts in name order: made once per view,
        so a listing of N agents reads the directory once, not once per agent (N x N)."""
        if self._index is None:
            index: dict[str, list[tuple[HostEntry, PublishedAgent]]] = {}
            for peer in self._peers:
                for agent in peer.agents:
                    index.setdefault(agent.name, []).append((peer, agent))
            self._index = index
        return self._index

    def hosts_of(self, name: str) -> list[AgentOnHost]:
        """The hosts that run ``name``, this one first when it does."""
        found = []
        local = self._supervisor.agents.get(name)
        if local is not None:
            found.append(_on_host(self._this, PublishedAgent.of(local), True))
        found += [_on_host(peer, agent, False) for peer, agent in self._elsewhere().get(name, ())]
        return found

    def remote(self, name: str) -> RemoteAgent | None:
        """``name`` when only other hosts run it."""
        if name in self._supervisor.agents:
            return None
        hosts = self.hosts_of(name)
        if not hosts:
            return None
        first = self._elsewhere()[name][0][1]
        return RemoteAgent(first, tuple(hosts))

    def actions_elsewhere(self) -> dict[str, list[str]]:
        """The agents only other hosts run, each with its actions' names as the first of its
        hosts describes them (a workflow's stages are checked against them)."""
        return {
            name: [a.name for a in on_hosts[0][1].actions]
            for name, on_hosts in self._elsewhere().items()
            if name not in self._supervisor.agents
        }

    def get(self, name: str) -> ManagedAgent | RemoteAgent:
        """GetAgent across the cluster: this host's agent, else one another host runs."""
        local = self._supervisor.agents.get(name)
        if local is not None:
            return local
        remote = self.remote(name)
        if remote is None:
            raise NotFound(
                f"agent {name!r} is not deployed on any host of the cluster",
                reason=Reason.AGENT_NOT_FOUND,
                resource=("agent", name),
            )
        return remote

    def list_agents(
        self,
        page_size: int,
        page_token: str,
        *,
        capability: str = "",
        language: str = "",
        kind: str = "",
    ) -> Page[ManagedAgent | RemoteAgent]:
        """ListAgents across the cluster: the same filters and page tokens as
        ``Supervisor.list_agents``, over this host's agents and those only others run."""
        agents: list[ManagedAgent | RemoteAgent] = [
            a for a in self._supervisor.agents.values() if _matches(a, capability, language, kind)
        ]
        remote_names = sorted(set(self._elsewhere()) - set(self._supervisor.agents))
        for name in remote_names:
            remote = self.remote(name)
            if remote is not None and _matches(remote.info, capability, language, kind):
                agents.append(remote)
        scope = f"agents/{capability}/{language}/{kind}"
        return paginate(agents, page_size, page_token, scope, key=lambda a: (a.name,))
