"""The cluster directory's records (ether_host.cluster) as AgentIOService and SupervisorService
messages: AgentInfo.hosts, an agent only other hosts run, HostInfo.cluster."""

from __future__ import annotations

from ether.v1 import agent_io_pb2, supervisor_pb2
from ether_host.cluster import AgentOnHost, ClusterStatus, ClusterView, RemoteAgent
from ether_host.supervisor import ManagedAgent
from ether_host.transport import agent_entries, convert


def _state(value: str) -> int:
    return int(agent_io_pb2.AgentState.Value(f"AGENT_STATE_{value}"))


def agent_host(host: AgentOnHost) -> agent_io_pb2.AgentHost:
    return agent_io_pb2.AgentHost(
        host=host.host,
        address=host.address,
        state=_state(host.state),  # type: ignore[arg-type]
        replicas=host.replicas,
        ready_replicas=host.ready_replicas,
        in_flight=host.in_flight,
        queued=host.queued,
        local=host.local,
    )


def remote_agent_info(agent: RemoteAgent) -> agent_io_pb2.AgentInfo:
    """An agent no replica of this host runs, as the first of its hosts describes it; its load
    is the sum over its hosts."""
    info = agent.info
    return agent_io_pb2.AgentInfo(
        name=info.name,
        type=convert.KINDS.get(info.kind, agent_io_pb2.AGENT_TYPE_UNSPECIFIED),
        language=convert.language(info.language),
        version=info.version,
        description=info.description,
        actions=[
            agent_io_pb2.ActionSpec(
                name=a.name,
                description=a.description,
                idempotent=a.idempotent,
                cache_ttl=convert.duration(a.cache_ttl) if a.cache_ttl else None,
            )
            for a in info.actions
        ],
        capabilities=list(info.capabilities),
        state=_state(agent.state),  # type: ignore[arg-type]
        replicas=sum(h.replicas for h in agent.hosts),
        ready_replicas=sum(h.ready_replicas for h in agent.hosts),
        in_flight=sum(h.in_flight for h in agent.hosts),
        queued=sum(h.queued for h in agent.hosts),
        max_concurrency=info.max_concurrency,
        hosts=[agent_host(h) for h in agent.hosts],
    )


def agent_info(agent: ManagedAgent | RemoteAgent, view: ClusterView) -> agent_io_pb2.AgentInfo:
    """ListAgents' and GetAgent's entry for an agent of the cluster: this host's own agent as
    without a cluster, plus the hosts that run it."""
    if isinstance(agent, RemoteAgent):
        return remote_agent_info(agent)
    info = agent_entries.agent_info(agent)
    info.hosts.extend(agent_host(h) for h in view.hosts_of(agent.name))
    return info


def membership(status: ClusterStatus) -> supervisor_pb2.ClusterMembership:
    return supervisor_pb2.ClusterMembership(
        host_name=status.host_name,
        advertise=status.advertise,
        redis=status.redis,
        degraded=status.degraded,
        hosts=list(status.hosts),
        unreachable=list(status.unreachable),
    )
