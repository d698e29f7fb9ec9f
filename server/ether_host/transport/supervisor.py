"""SupervisorService: decode, call the supervisor, encode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from ether.v1 import supervisor_pb2, supervisor_pb2_grpc
from ether_host.cluster import Cluster
from ether_host.errors import NotFound, Unavailable
from ether_host.lifecycle import Lifecycle
from ether_host.reasons import Reason
from ether_host.supervisor import (
    AgentSpec,
    LifecycleEvent,
    LogLine,
    ManagedAgent,
    Replica,
    Supervisor,
)
from ether_host.transport import agent_entries, cluster_convert, convert
from ether_host.transport.terminal_forward import PeerChannels, forwarded

_RESTART = {
    supervisor_pb2.RESTART_POLICY_ALWAYS: "always",
    supervisor_pb2.RESTART_POLICY_ON_FAILURE: "on-failure",
    supervisor_pb2.RESTART_POLICY_NEVER: "never",
}
_RESTART_VALUES = {v: k for k, v in _RESTART.items()}


class SupervisorServicer(supervisor_pb2_grpc.SupervisorServiceServicer):
    """Agent processes: deploy, start, stop, watch."""

    def __init__(
        self,
        supervisor: Supervisor,
        lifecycle: Lifecycle,
        cluster: Cluster | None = None,
        peers: PeerChannels | None = None,
    ) -> None:
        self._supervisor = supervisor
        self._lifecycle = lifecycle
        self._cluster = cluster
        self._peers = peers  # in a cluster: WatchEvents of another host's agent goes there

    async def DeployAgent(
        self, request: supervisor_pb2.DeployAgentRequest, context: grpc.aio.ServicerContext
    ) -> supervisor_pb2.DeployAgentResponse:
        agent = await self._supervisor.deploy(_spec_request(request.spec))
        return supervisor_pb2.DeployAgentResponse(agent=agent_status(agent))

    async def RemoveAgent(
        self, request: supervisor_pb2.RemoveAgentRequest, context: grpc.aio.ServicerContext
    ) -> supervisor_pb2.RemoveAgentResponse:
        await self._supervisor.remove(request.name)
        return supervisor_pb2.RemoveAgentResponse()

    async def StartAgent(
        self, request: supervisor_pb2.StartAgentRequest, context: grpc.aio.ServicerContext
    ) -> supervisor_pb2.StartAgentResponse:
        agent = await self._supervisor.start(request.name)
        return supervisor_pb2.StartAgentResponse(agent=agent_status(agent))

    async def StopAgent(
        self, request: supervisor_pb2.StopAgentRequest, context: grpc.aio.ServicerContext
    ) -> supervisor_pb2.StopAgentResponse:
        grace = convert.seconds(request.grace) if request.HasField("grace") else None
        agent = await self._supervisor.stop(request.name, grace)
        return supervisor_pb2.StopAgentResponse(agent=agent_status(agent))

    async def RestartAgent(
        self, request: supervisor_pb2.RestartAgentRequest, context: grpc.aio.ServicerContext
    ) -> supervisor_pb2.RestartAgentResponse:
        agent = await self._supervisor.restart(request.name)
        return supervisor_pb2.RestartAgentResponse(agent=agent_status(agent))

    async def ScaleAgent(
        self, request: supervisor_pb2.ScaleAgentRequest, context: grpc.aio.ServicerContext
    ) -> supervisor_pb2.ScaleAgentResponse:
        agent = await self._supervisor.scale(request.name, request.replicas)
        return supervisor_pb2.ScaleAgentResponse(agent=agent_status(agent))

    async def ListProcesses(
        self, request: supervisor_pb2.ListProcessesRequest, context: grpc.aio.ServicerContext
    ) -> supervisor_pb2.ListProcessesResponse:
        page = self._supervisor.list_processes(request.agent, request.page_size, request.page_token)
        return supervisor_pb2.ListProcessesResponse(
            processes=[process_info(r) for r in page.items], next_page_token=page.next_page_token
        )

    async def GetHostInfo(
        self, request: supervisor_pb2.GetHostInfoRequest, context: grpc.aio.ServicerContext
    ) -> supervisor_pb2.GetHostInfoResponse:
        info = self._lifecycle.info
        if info is None:  # not serving yet: no call reaches a host before it serves
            raise Unavailable("the host is starting", reason=Reason.HOST_STARTING, retry_after=1.0)
        isolation = info.isolation
        return supervisor_pb2.GetHostInfoResponse(
            host=supervisor_pb2.HostInfo(
                version=info.version,
                listeners=list(info.listeners),
                auth=info.auth,
                tls=info.tls,
                client_certificates=info.client_certificates,
                isolation=supervisor_pb2.Isolation(
                    sandbox_mode=isolation.mode,
                    sandboxed=isolation.sandboxed,
                    bubblewrap=isolation.bubblewrap,
                    pid_namespaces=isolation.pid_namespace,
                    namespaces=list(isolation.namespaces),
                    why_not=isolation.why_not,
                    limits=dict(isolation.limits),
                ),
                started_at=convert.timestamp(info.started_at),
                cluster=(
                    None
                    if self._cluster is None
                    else cluster_convert.membership(self._cluster.status())
                ),
            )
        )

    async def WatchEvents(
        self, request: supervisor_pb2.WatchEventsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[supervisor_pb2.WatchEventsResponse]:
        cluster, here = self._cluster, ""
        if cluster is not None:
            here = cluster.settings.host_name
            if self._peers is not None and not forwarded(context):
                where = await cluster.events_host(request.agent, request.host)
                if where is not None:  # docs/cluster.md, "Events across hosts"
                    async for message in self._peers.forward_events(*where, request, context):
                        yield message
                    return
        if request.host and request.host != here:
            raise NotFound(
                f"host {request.host!r}: this host is in no cluster; leave host empty"
                if cluster is None
                else f"host {request.host!r} is not this host ({here})",
                reason=Reason.HOST_NOT_FOUND,
                resource=("host", request.host),
            )
        if request.agent:
            self._supervisor.get(request.agent)
        history = self._supervisor.events
        after = history.last_sequence if request.after_sequence < 0 else request.after_sequence
        async for sequence, event in history.follow(
            after, until=lambda: self._lifecycle.is_stopping
        ):
            if not request.agent or event.agent == request.agent:
                message = _event(sequence, event)
                message.host = here
                yield message

    async def StreamLogs(
        self, request: supervisor_pb2.StreamLogsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[supervisor_pb2.StreamLogsResponse]:
        agent, tail = self._supervisor.log_tail(request.agent, request.tail_lines)
        for _, line in tail:
            yield _log(line)
        if not request.follow:
            return
        after = tail[-1][0] if tail else agent.logs.last_sequence
        async for _, line in agent.logs.follow(after, until=lambda: self._lifecycle.is_stopping):
            yield _log(line)


_LINK_PROTOCOL = {
    supervisor_pb2.LINK_PROTOCOL_AUTO: "auto",
    supervisor_pb2.LINK_PROTOCOL_LEGACY: "legacy",
    supervisor_pb2.LINK_PROTOCOL_MCP: "mcp",
}
_LINK_PROTOCOL_VALUES = {v: k for k, v in _LINK_PROTOCOL.items()}
_CPU_POLICY = {
    supervisor_pb2.CPU_SCHEDULING_POLICY_BATCH: "batch",
    supervisor_pb2.CPU_SCHEDULING_POLICY_OTHER: "other",
    supervisor_pb2.CPU_SCHEDULING_POLICY_IDLE: "idle",
}
_CPU_POLICY_VALUES = {v: k for k, v in _CPU_POLICY.items()}
# AgentSpec's Duration fields, each an agent.toml key of seconds of the same name.
_DURATIONS = (
    "start_timeout",
    "stop_grace",
    "cancel_grace",
    "ping_interval",
    "ping_timeout",
    "backoff_base",
    "backoff_cap",
    "restart_period",
    "stable_after",
    "reset_after",
)


def _spec_request(spec: supervisor_pb2.AgentSpec) -> dict[str, Any]:
    """An AgentSpec message as the plain request the supervisor merges with agent.toml: only
    the fields the caller set, so that agent.toml and the defaults fill in the rest."""
    request: dict[str, Any] = {
        "name": spec.name,
        "path": spec.path,
        "language": convert.LANGUAGE_NAMES.get(spec.language, ""),
        "type": convert.KIND_NAMES.get(spec.type, ""),
        "restart": _RESTART.get(spec.restart, ""),
        "module": spec.module,
        "function": spec.function,
        "description": spec.description,
        "main": spec.main,
        "protocol": _LINK_PROTOCOL.get(spec.protocol, ""),
        "cpu_scheduling_policy": _CPU_POLICY.get(spec.cpu_scheduling_policy, ""),
        "command": list(spec.command),
        "env": dict(spec.env),
        "config": convert.struct_to_dict(spec.config),
        "capabilities": list(spec.capabilities),
        "calls": list(spec.allowed_calls),
    }
    if spec.HasField("install"):
        request["install"] = {"npm": spec.install.npm, "pip": spec.install.pip}
    for key in ("replicas", "max_queue", "max_frame", "max_concurrency"):  # 0 means unset
        if value := getattr(spec, key):
            request[key] = value
    for key in ("start_retries", "max_restarts"):  # optional: 0 is a value
        if spec.HasField(key):
            request[key] = getattr(spec, key)
    for key in _DURATIONS:
        if spec.HasField(key):
            request[key] = convert.seconds(getattr(spec, key))
    return request


def _spec_message(spec: AgentSpec) -> supervisor_pb2.AgentSpec:
    """The spec an agent runs with, every default filled in."""
    message = supervisor_pb2.AgentSpec(
        name=spec.name,
        path=str(spec.path),
        language=convert.language(spec.language),
        type=convert.KINDS[spec.kind],
        replicas=spec.replicas,
        restart=_RESTART_VALUES[spec.restart],
        module=spec.module,
        function=spec.function,
        env=spec.env,
        config=convert.dict_to_struct(spec.config),
        capabilities=spec.capabilities,
        allowed_calls=spec.allowed_calls,
        max_frame=spec.max_frame,
        description=spec.description,
        command=spec.command,
        main=spec.main,
        protocol=_LINK_PROTOCOL_VALUES[spec.protocol],
        max_queue=spec.max_queue,
        cpu_scheduling_policy=_CPU_POLICY_VALUES[spec.cpu_scheduling_policy],
        start_retries=spec.start_retries,
        max_restarts=spec.max_restarts,
        max_concurrency=spec.max_concurrency,
    )
    if spec.install:
        message.install.CopyFrom(supervisor_pb2.AgentInstall(**spec.install))
    for key in _DURATIONS:
        getattr(message, key).CopyFrom(convert.duration(getattr(spec, key)))
    return message


def process_info(replica: Replica) -> supervisor_pb2.ProcessInfo:
    info = supervisor_pb2.ProcessInfo(
        agent=replica.agent.name,
        replica=replica.index,
        pid=replica.pid,
        state=convert.agent_state(replica.state),  # type: ignore[arg-type]
        restarts=replica.restarts,
        in_flight=replica.assigned,
        reason=replica.reason,
    )
    if replica.pid and replica.started_at:
        info.started_at.CopyFrom(convert.timestamp(replica.started_at))
    if replica.last_exit_code is not None:
        info.last_exit_code = replica.last_exit_code
    if replica.last_signal is not None:
        info.last_signal = replica.last_signal
    if replica.connection is not None:
        info.noise_lines = replica.connection.counters.noise_lines
        info.protocol_errors = replica.connection.counters.protocol_errors
    return info


def agent_status(agent: ManagedAgent) -> supervisor_pb2.AgentStatus:
    return supervisor_pb2.AgentStatus(
        info=agent_entries.agent_info(agent),
        spec=_spec_message(agent.spec),
        processes=[process_info(r) for r in agent.replicas],
        reason=agent.status_reason(),
        event_sequence=agent.host.events.last_sequence,
    )


def _event(sequence: int, event: LifecycleEvent) -> supervisor_pb2.WatchEventsResponse:
    message = supervisor_pb2.WatchEventsResponse(
        sequence=sequence,
        time=convert.timestamp(event.time),
        agent=event.agent,
        replica=event.replica,
        state=convert.agent_state(event.state),  # type: ignore[arg-type]
        previous_state=convert.agent_state(event.previous),  # type: ignore[arg-type]
        reason=event.reason,
        pid=event.pid,
        stderr_tail=list(event.stderr_tail),
    )
    if event.exit_code is not None:
        message.exit_code = event.exit_code
    if event.signal is not None:
        message.signal = event.signal
    return message


def _log(line: LogLine) -> supervisor_pb2.StreamLogsResponse:
    return supervisor_pb2.StreamLogsResponse(
        time=convert.timestamp(line.time),
        agent=line.agent,
        replica=line.replica,
        pid=line.pid,
        source=line.source,
        level=line.level,
        message=line.message,
        fields=convert.dict_to_struct(line.fields),
    )
