"""The composition root: builds every part of the host and runs it in one task group."""

from __future__ import annotations

import gc
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import grpc
import structlog
from anyio.abc import TaskStatus
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ether.v1 import (
    agent_io_pb2,
    agent_io_pb2_grpc,
    gateway_pb2,
    gateway_pb2_grpc,
    supervisor_pb2,
    supervisor_pb2_grpc,
    terminal_pb2,
    terminal_pb2_grpc,
    workflow_pb2,
    workflow_pb2_grpc,
)
from ether_host import __version__, containment
from ether_host.a2a import SERVICE_NAME as A2A_SERVICE
from ether_host.a2a import Endpoints, EtherRequestHandler
from ether_host.a2a import add_to_server as add_a2a_to_server
from ether_host.a2a import http_routes as a2a_http_routes
from ether_host.agents import Dispatcher, MemoryResultCache
from ether_host.auth import TokenFileError, TokenTable, load_token_file
from ether_host.cluster import Cluster, ClusterGateway, ClusterSettings, RedisSessionRecords
from ether_host.config import HostConfig
from ether_host.gateway import Gateway, GatewayStore
from ether_host.health import AgentHealth, readiness
from ether_host.http import (
    HttpListener,
    HttpListenError,
    build_http_app,
    console_routes,
    metrics_route,
)
from ether_host.lifecycle import HostInfo, Lifecycle
from ether_host.logs import adopt_library_logs, join_traces
from ether_host.metrics import Metrics
from ether_host.notifications import Notifier, NotifySettings
from ether_host.procs import (
    ChildRegistry,
    become_subreaper,
    keep_helper_threads_batched,
    kill_leftovers,
)
from ether_host.resources import LimitSettings, Resources
from ether_host.sandbox import SandboxSettings
from ether_host.supervisor import Supervisor
from ether_host.telemetry import Tracing, build_provider, log_ids
from ether_host.terminals import (
    AgentTerminals,
    TerminalManager,
    TerminalPlacement,
    TerminalSettings,
)
from ether_host.transport.agent_io import AgentIOServicer
from ether_host.transport.gateway import GatewayServicer
from ether_host.transport.health import AGENT_IO, GrpcHealthSink, HealthServicer
from ether_host.transport.interceptors import (
    Authenticate,
    DefaultDeadline,
    MethodTableServer,
)
from ether_host.transport.limits import StreamQuota, server_options
from ether_host.transport.listen import (
    ListenError,
    bind_tcp,
    bind_unix,
    is_loopback,
    server_credentials,
    split_host_port,
)
from ether_host.transport.rpc_logging import RpcLogging
from ether_host.transport.supervisor import SupervisorServicer
from ether_host.transport.terminal import TerminalServicer
from ether_host.transport.terminal_forward import TerminalForwarder, forward_credentials
from ether_host.transport.workflow import WorkflowServicer
from ether_host.workflows import Workflows

log = structlog.get_logger("ether.host")


def _check_exposure(config: HostConfig, auth_on: bool) -> None:
    """Beyond loopback, calls cross a network: they need credentials, and TLS so that a token
    is not readable on the way. The same rule for the gRPC port and the HTTP listener."""
    for key, address in (("listen", config.listen), ("http_listen", config.http_listen)):
        if not address:
            continue
        host, _ = split_host_port(address)
        if is_loopback(host):
            continue
        if not auth_on:
            raise ListenError(
                f"refusing to {key} on non-loopback address {address} without auth: "
                "set auth_tokens_file (--auth-tokens-file) or listen on 127.0.0.1"
            )
        if not config.tls_cert:
            raise ListenError(
                f"refusing to {key} on non-loopback address {address} in plaintext: "
                "set tls_cert and tls_key (--tls-cert, --tls-key) or listen on 127.0.0.1"
            )
    if config.http_listen and config.tls_client_ca:
        raise ListenError(
            "http_listen: the HTTP listener names callers by bearer token only, and "
            "tls_client_ca identifies them by client certificate: unset one of the two"
        )


def _authenticate(config: HostConfig, tokens: TokenTable | None) -> Authenticate | None:
    """Who must show what: a token when the file has tokens, a client certificate when
    tls_client_ca is set, both when tls_require_token says so (docs/auth.md)."""
    certificate = bool(config.tls_client_ca)
    if certificate and tokens is None:
        raise TokenFileError(
            "tls_client_ca needs auth_tokens_file: its 'NAME cert:SUBJECT [RIGHTS]' lines say "
            "who each client certificate is"
        )
    if tokens is None:
        return None
    if config.tls_require_token and not certificate:
        raise TokenFileError("tls_require_token needs tls_client_ca (a token AND a certificate)")
    token = not certificate or config.tls_require_token
    if token and not tokens.has_tokens:
        raise TokenFileError(f"token file {config.auth_tokens_file} holds no tokens")
    if certificate and not tokens.has_certificates:
        raise TokenFileError(
            f"token file {config.auth_tokens_file} has no 'NAME cert:SUBJECT' line for "
            "tls_client_ca's certificates"
        )
    return Authenticate(tokens, token=token, certificate=certificate)


@dataclass
class Core:
    """Every core part of the host, built once here."""

    lifecycle: Lifecycle
    children: ChildRegistry
    supervisor: Supervisor
    dispatcher: Dispatcher
    workflows: Workflows
    gateway: Gateway
    terminals: TerminalManager
    tracing: Tracing | None = None
    cluster: Cluster | None = None  # [cluster] redis_url set: several hosts on one Redis
    cluster_gateway: ClusterGateway | None = None  # with a cluster: the gateway across hosts
    notifier: Notifier | None = None  # tasks and runs that name a webhook or a reply topic


def _tracing(config: HostConfig) -> Tracing | None:
    """The host's tracer, exporting over OTLP/gRPC to ``[telemetry] otlp_endpoint``; None (no
    tracing, no cost) when it is unset (docs/telemetry.md)."""
    if not config.telemetry_otlp_endpoint:
        return None
    # The export runs in a relay child process, started here (telemetry/relay.py).
    provider = build_provider(
        config.telemetry_otlp_endpoint,
        service_name=config.telemetry_service_name,
        sample_ratio=config.telemetry_sample_ratio,
        export_delay=config.telemetry_export_delay,
    )
    join_traces(log_ids)  # every log line written inside a recorded span names it
    adopt_library_logs("opentelemetry")  # an export that fails says so in the host's log
    return Tracing(provider, record_payloads=config.telemetry_record_payloads)


def build_core(config: HostConfig) -> Core:
    # First: a bad [limits] table stops the start (exit 2) before anything runs.
    resources = Resources(LimitSettings.from_config(config.limits))
    record = config.state_dir / "children.json"
    kill_leftovers(record)
    children = ChildRegistry(record)
    supervisor = Supervisor(
        config.state_dir, children, sandbox=SandboxSettings.from_config(config.sandbox)
    )
    tracing = _tracing(config)
    dispatcher = Dispatcher(supervisor, tracing=tracing)
    if config.cache_max_bytes:  # a cluster's join puts its Redis cache in place of this one
        dispatcher.result_cache = MemoryResultCache(config.cache_max_bytes)
    workflows = Workflows(config.state_dir, supervisor, dispatcher, config.workflows)
    gateway_store = GatewayStore(config.state_dir.absolute() / "gateway" / "state.sqlite3")
    # In a cluster the sessions are kept in Redis, where every host reads them (docs/cluster.md).
    cluster_sessions = RedisSessionRecords() if config.cluster_redis_url else None
    gateway = Gateway(
        supervisor, dispatcher, config.state_dir, config.gateway, gateway_store, cluster_sessions
    )
    terminals = TerminalManager(
        TerminalSettings.from_config(config.terminals), children, config.state_dir
    )
    dispatcher.register_calls("term.*", AgentTerminals(terminals, supervisor).handle)
    supervisor.resources = terminals.resources = resources
    terminals.tracing = tracing
    lifecycle = Lifecycle()
    cluster = _cluster(config, supervisor, lifecycle, dispatcher)
    core = Core(
        lifecycle,
        children,
        supervisor,
        dispatcher,
        workflows,
        gateway,
        terminals,
        tracing,
        cluster,
        None
        if cluster is None or cluster_sessions is None
        else ClusterGateway(cluster, gateway, lifecycle, cluster_sessions),
    )
    core.notifier = _notifier(config, core)
    gateway.notices = core.notifier  # sessions opened with a notify deliver through it
    return core


def _notifier(config: HostConfig, core: Core) -> Notifier:
    """Completion notifications (docs/notifications.md): signed with ``[notifications] secret``,
    sent under the gateway's egress policy, recorded in the state directory."""
    settings = NotifySettings(
        secret=config.notifications_secret,
        max_attempts=config.notifications_max_attempts,
        backoff=config.notifications_backoff,
        max_backoff=config.notifications_max_backoff,
    )
    return Notifier(settings, core.dispatcher, core.gateway, core.workflows, config.state_dir)


def _cluster(
    config: HostConfig, supervisor: Supervisor, lifecycle: Lifecycle, dispatcher: Dispatcher
) -> Cluster | None:
    """This host's membership of a cluster (docs/cluster.md), joined once the host is bound;
    None (nothing started, redis-py not imported) when ``[cluster] redis_url`` is unset."""
    if not config.cluster_redis_url:
        return None
    settings = ClusterSettings(
        redis_url=config.cluster_redis_url,
        host_name=config.cluster_host_name,
        advertise=config.cluster_advertise,
        heartbeat=config.cluster_heartbeat,
        dropout=config.cluster_dropout,
        claim_idle=config.cluster_claim_idle,
    )
    return Cluster(settings, supervisor, lifecycle, dispatcher)


def _services(
    core: Core, terminal_forwarder: TerminalForwarder | None = None
) -> list[tuple[Any, Any, Any]]:
    """(service descriptor, add-to-server function, servicer) for every Ether service."""
    return [
        (
            agent_io_pb2.DESCRIPTOR.services_by_name["AgentIOService"],
            agent_io_pb2_grpc.add_AgentIOServiceServicer_to_server,
            AgentIOServicer(core.supervisor, core.dispatcher, core.cluster, core.notifier),
        ),
        (
            supervisor_pb2.DESCRIPTOR.services_by_name["SupervisorService"],
            supervisor_pb2_grpc.add_SupervisorServiceServicer_to_server,
            SupervisorServicer(core.supervisor, core.lifecycle, core.cluster, terminal_forwarder),
        ),
        (
            workflow_pb2.DESCRIPTOR.services_by_name["WorkflowService"],
            workflow_pb2_grpc.add_WorkflowServiceServicer_to_server,
            WorkflowServicer(core.workflows, core.lifecycle, core.notifier),
        ),
        (
            terminal_pb2.DESCRIPTOR.services_by_name["TerminalService"],
            terminal_pb2_grpc.add_TerminalServiceServicer_to_server,
            TerminalServicer(core.terminals, core.lifecycle, terminal_forwarder),
        ),
        (
            gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"],
            gateway_pb2_grpc.add_GatewayServiceServicer_to_server,
            GatewayServicer(core.gateway),
        ),
    ]


def _http_listener(
    config: HostConfig,
    core: Core,
    tokens: TokenTable | None,
    a2a: EtherRequestHandler,
    metrics: Metrics | None = None,
    rpc_handlers: Mapping[str, Any] | None = None,
) -> tuple[HttpListener | None, list[Any]]:
    """The HTTP listener with every surface mounted on it (build_http_app says how to add one),
    or None when http_listen is unset; and the surfaces' own tasks (``run(task_status=...)``),
    which the host's task group starts before it serves."""
    if not config.http_listen:
        return None, []
    # Imported here: the MCP SDK's server side costs about 40 MiB of RSS, paid only with a listener.
    from ether_host.http import CoreTools, McpSurface
    from ether_host.transport.console_rpc import ConsoleRpc
    from ether_host.transport.console_ws import console_ws_route

    mcp = McpSurface(
        CoreTools(core.supervisor, core.dispatcher, core.lifecycle, config.default_deadline),
        version=__version__,
        lifecycle=core.lifecycle,
        auth=tokens is not None,
        grace=config.shutdown_grace,
    )
    mounts: list[Any] = [mcp.route, *a2a_http_routes(a2a)]
    if rpc_handlers is not None:  # the web console (docs/console.md): the gRPC port's handlers
        mounts.extend(
            console_routes(
                ConsoleRpc(rpc_handlers),
                console_ws_route(rpc_handlers, stopping=lambda: core.lifecycle.is_stopping),
            )
        )
    if metrics is not None:
        mounts.append(metrics_route(metrics.render))
    app = build_http_app(
        mounts,
        tokens=tokens,
        lifecycle=core.lifecycle,
        readiness=lambda: readiness(core.supervisor, core.lifecycle, core.cluster),
        tracing=core.tracing,
    )
    tls = (config.tls_cert, config.tls_key) if config.tls_cert else None
    try:
        listener = HttpListener(config.http_listen, app, tls=tls, grace=config.shutdown_grace)
    except HttpListenError as error:
        raise ListenError(str(error)) from None
    return listener, [mcp.run]


def _metrics(config: HostConfig, core: Core) -> Metrics | None:
    """The host's Prometheus metrics (docs/telemetry.md, "Metrics") when ``[telemetry]
    metrics`` is on, wired to the dispatcher; None (no route, no cost) when off."""
    if not config.telemetry_metrics:
        return None
    if not config.http_listen:
        log.warning("telemetry metrics are on but http_listen is unset: nothing serves /metrics")
    metrics = Metrics(
        core.supervisor,
        core.lifecycle,
        terminals=core.terminals,
        gateway=core.gateway,
        workflows=core.workflows,
        cluster=core.cluster,
    )
    core.dispatcher.task_ended = metrics.task_ended
    core.dispatcher.cache_looked_up = metrics.cache_looked_up
    core.dispatcher.remote_task_ended = metrics.remote_task_ended
    return metrics


def _log_isolation(found: containment.Isolation) -> None:
    """Say at every start what isolates agents, and loudly when it is less than asked."""
    fields = {
        "mode": found.mode,
        "bubblewrap": found.bubblewrap,
        "pid_namespace": found.pid_namespace,
        "namespaces": list(found.namespaces),
        "limits": dict(found.limits),
    }
    if found.sandboxed:
        log.info("agents run in sandboxes", **fields)
    elif found.mode == "required":
        log.error(
            "agents cannot start: the host config requires a sandbox this machine cannot make",
            reason=found.why_not,
            **fields,
        )
    else:
        reason = 'sandbox.mode = "off" in the host config' if found.mode == "off" else found.why_not
        log.warning("agents run without a sandbox", reason=reason, **fields)


def _name_the_event_loop() -> None:
    """Tell sniffio, for this thread, that asyncio runs here.

    Once sniffio is installed (a2a-sdk brings it), anyio asks it which library runs before
    making a CancelScope or an Event; sniffio finds asyncio only inside a task or through a
    context variable that anyio.run sets and not every context carries. Our read callbacks (an
    agent's stdout, a terminal's output) run outside any task, in the context of the task that
    made the pipe: for an agent deployed by an RPC, every host call it made failed with
    NoEventLoopError. The thread's name holds for every callback of the loop."""
    try:
        import sniffio
    except ImportError:  # without sniffio, anyio asks asyncio for the running loop: it works
        return
    sniffio.thread_local.name = "asyncio"


async def run_host(
    config: HostConfig, *, task_status: TaskStatus[list[str]] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Serve until SIGINT, SIGTERM or SIGHUP, then drain and stop everything."""
    _name_the_event_loop()
    tokens = load_token_file(Path(config.auth_tokens_file)) if config.auth_tokens_file else None
    _check_exposure(config, tokens is not None)
    config.state_dir.mkdir(parents=True, exist_ok=True)

    authenticate = _authenticate(config, tokens)
    credentials = server_credentials(config.tls_cert, config.tls_key, config.tls_client_ca)

    core = build_core(config)
    metrics = _metrics(config, core)
    # Outermost: the call's line and, with tracing on, its span cover the whole call.
    decorators = [RpcLogging(None if metrics is None else metrics.rpc_ended, core.tracing).decorate]
    if authenticate is not None:
        decorators.append(authenticate.decorate)
    decorators.append(DefaultDeadline(config.default_deadline).decorate)
    decorators.append(StreamQuota(config.max_streams_per_caller, config.max_streams).decorate)
    grpc_server = grpc.aio.server(
        options=server_options(config), maximum_concurrent_rpcs=config.max_concurrent_rpcs
    )
    server = MethodTableServer(grpc_server, decorators)
    if core.tracing is not None:  # each RPC's span looks for a traceparent in its metadata
        server.keep_call_metadata()

    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME]
    # In a cluster: the gRPC client that takes a call on another host's terminal there.
    cluster = core.cluster
    forwarder = (
        None
        if cluster is None
        else TerminalForwarder(
            lambda: cluster.settings.host_name,
            forward_credentials(config.cluster_tls_ca, serves_tls=bool(config.tls_cert)),
        )
    )
    services = _services(core, forwarder)
    for descriptor, add, servicer in services:
        add(servicer, server)
        names.append(descriptor.full_name)
    # A2A next to them (docs/interop.md): the same port, wrappers, credentials and rights.
    a2a = EtherRequestHandler(core.supervisor, core.dispatcher, config.default_deadline)
    add_a2a_to_server(a2a, server)
    names.append(A2A_SERVICE)
    reflection.enable_server_reflection(names, server)

    addresses = []
    if config.listen:
        addresses.append(bind_tcp(server, config.listen, credentials))
    if config.unix_socket:
        addresses.append(bind_unix(server, config.unix_socket))
    if not addresses:
        raise ListenError("nothing to listen on: set listen or unix_socket")
    http, http_services = _http_listener(config, core, tokens, a2a, metrics, server.handlers())
    if core.cluster is not None:  # Redis out of reach or the name taken: the host does not start
        await core.cluster.join(addresses[0] if config.listen else "")
        # Terminal ids name this host now, and another host's terminals are found through it.
        core.terminals.placement = TerminalPlacement(
            lambda: cluster.settings.host_name if cluster else "",
            core.cluster,
            forward=config.cluster_forward_terminals,
        )
    if core.cluster_gateway is not None:
        await core.cluster_gateway.join()

    if not become_subreaper():
        log.warning("cannot become a child subreaper; orphans of agents re-parent to init")
    containment.probe()  # once, at start: PID namespaces per child, or one warning why not
    core.supervisor.resources.start()  # which limits cgroups enforce, which rlimits (logged)
    isolation = containment.isolation(core.supervisor.sandbox.mode)
    _log_isolation(replace(isolation, limits=core.supervisor.resources.mechanisms()))
    async with anyio.create_task_group() as tg:
        tg.start_soon(core.children.run_reaper)
        await tg.start(core.supervisor.run)
        # ether.agent.NAME and the AgentIO service follow the agents' replicas (docs/health.md).
        health_sink = GrpcHealthSink(health_servicer)
        await tg.start(AgentHealth(core.supervisor, core.lifecycle, health_sink).run)
        await tg.start(core.dispatcher.run)
        if metrics is not None:  # restarts and FATALs, from the supervisor's events
            await tg.start(metrics.run)
        await tg.start(core.workflows.run)
        await tg.start(core.gateway.run)
        if core.notifier is not None:  # after the gateway: deliveries left pending go on
            await tg.start(core.notifier.run)
        await tg.start(core.terminals.run)
        await tg.start(a2a.run)
        if core.cluster is not None:
            await tg.start(core.cluster.run)
        if core.cluster_gateway is not None:
            await tg.start(core.cluster_gateway.run)
        await core.supervisor.deploy_at_start(  # the config's agents, then the recorded ones
            [dict(entry) for entry in config.agents], config.agents_dir
        )
        # SIGHUP too: the terminal that started the host closing. Its default action ends the
        # host at once: calls in flight cut, no drain, runs not ended INTERRUPTED, exit -1.
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            core.lifecycle.info = HostInfo(
                version=__version__,
                listeners=(*addresses, *([http.address] if http else [])),
                auth=tokens is not None,
                tls=credentials is not None,
                client_certificates=bool(config.tls_client_ca),
                isolation=replace(isolation, limits=core.supervisor.resources.mechanisms()),
                started_at=time.time(),
            )
            a2a.endpoints = Endpoints(
                grpc=addresses[0], http=http.address if http else "", auth=tokens is not None
            )
            await server.start()
            for run_service in http_services:
                await tg.start(run_service)
            if http is not None:
                await tg.start(http.serve)
            tg.start_soon(keep_helper_threads_batched)  # gRPC's threads exist once started
            # What exists now (modules, descriptors, the core) lives as long as the host: out of
            # the collector's sight, a full collection under load paused the event loop for
            # ~4 ms instead of ~25 ms (60,000 objects fewer to walk each time).
            gc.collect()
            gc.freeze()
            # A young generation of 10,000 objects instead of 700: a workflow map keeps a few
            # objects per finished task (its record, result, metadata) for the run's life, and
            # the default thresholds walked them again every few hundred tasks. Side by side, a
            # 10,000-task map stage took ~4 µs of host CPU per task fewer, batched Pipe the same;
            # a young collection walks at most 10,000 objects (~0.15 ms here).
            gc.set_threshold(10_000, 10, 10)
            for descriptor, _, _ in services:
                if descriptor.full_name != AGENT_IO:  # SERVING while some agent runs
                    health_servicer.set(
                        descriptor.full_name, health_pb2.HealthCheckResponse.SERVING
                    )
            health_servicer.set(A2A_SERVICE, health_pb2.HealthCheckResponse.SERVING)
            health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
            log.info(
                "serving",
                addresses=addresses,
                http=http.address if http else None,
                auth=tokens is not None,
                tls=credentials is not None,
                client_certificates=bool(config.tls_client_ca),
                state_dir=str(config.state_dir),
            )
            task_status.started(addresses)
            async for signum in signals:
                log.info(
                    "stopping", signal=signal.Signals(signum).name, grace_s=config.shutdown_grace
                )
                break
        core.lifecycle.stopping.set()
        if core.cluster is not None:  # the other hosts stop listing this one's agents at once
            await core.cluster.leave()
        await core.workflows.shutdown()  # runs end INTERRUPTED before their agents stop
        core.gateway.shutdown()  # sessions close, so their streams end with session_closed
        core.supervisor.events.wake()
        for agent in core.supervisor.agents.values():
            agent.logs.wake()
        health_servicer.enter_graceful_shutdown()
        await core.terminals.close_all()
        # The HTTP listener answers while the gRPC calls drain: probes read 503 "the host is
        # stopping" (new requests are refused the same way, http/guard.py) instead of finding
        # the port closed; then its own requests get what is left of the grace.
        draining = time.monotonic()
        await server.stop(config.shutdown_grace)
        if forwarder is not None:  # its calls ended with the server's
            await forwarder.close()
        if http is not None:
            http.stop(max(0.5, config.shutdown_grace - (time.monotonic() - draining)))
            await http.stopped.wait()
        await core.supervisor.stop_all()
        if core.cluster_gateway is not None:  # after the last session and message writes
            await core.cluster_gateway.close()
        core.supervisor.resources.close()  # this host's control groups
        if core.tracing is not None:  # the last spans go out before the host does
            await anyio.to_thread.run_sync(core.tracing.shutdown)
        tg.cancel_scope.cancel()
    log.info("stopped")
