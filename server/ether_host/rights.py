"""The rights a caller may hold, and the one table of which RPC needs which (docs/auth.md).

A token or certificate line of the credentials file grants rights (auth.py); every RPC of the
five services needs the right this table names, checked once per call before the method runs
(transport/interceptors.py, RequireRights). Health needs no credential at all and reflection
only a valid one. Some operations check a further right where the request says more: a
terminal of another owner needs ``terminal.admin``, input on an attach ``terminal.write``,
watching an agent's mailbox ``gateway.admin``, and Execute, ExecuteStream and Pipe the
``agent.execute`` right for the agent named (``agent.execute:NAME`` grants one agent only).

The core never imports grpc, so the methods are plain strings; a test walks the services'
descriptors and holds this table to every RPC they declare (tests/host/test_rights.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from ether_host.auth import Identity
from ether_host.errors import PermissionDenied
from ether_host.reasons import Reason

AGENT_READ = "agent.read"
AGENT_EXECUTE = "agent.execute"
AGENT_LOGS = "agent.logs"
AGENT_DEPLOY = "agent.deploy"
AGENT_CONTROL = "agent.control"
WORKFLOW_READ = "workflow.read"
WORKFLOW_RUN = "workflow.run"
WORKFLOW_CANCEL = "workflow.cancel"
TERMINAL_CREATE = "terminal.create"
TERMINAL_READ = "terminal.read"
TERMINAL_WRITE = "terminal.write"
TERMINAL_ATTACH = "terminal.attach"
TERMINAL_RESIZE = "terminal.resize"
TERMINAL_SIGNAL = "terminal.signal"
TERMINAL_CLOSE = "terminal.close"
TERMINAL_ADMIN = "terminal.admin"
GATEWAY_SESSION = "gateway.session"
GATEWAY_MESSAGE = "gateway.message"
GATEWAY_ADMIN = "gateway.admin"
GATEWAY_AUDIT = "gateway.audit"


A2A_METHODS = (
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
)


def _service(name: str, methods: Mapping[str, str]) -> dict[str, str]:
    return {f"/ether.v1.{name}/{method}": right for method, right in methods.items()}


# Method -> the right it needs: the only place this is written down.
METHOD_RIGHTS: Mapping[str, str] = {
    **_service(
        "AgentIOService",
        {
            "ListAgents": AGENT_READ,
            "GetAgent": AGENT_READ,
            "Execute": AGENT_EXECUTE,
            "ExecuteStream": AGENT_EXECUTE,
            "Pipe": AGENT_EXECUTE,
            "CancelTask": AGENT_EXECUTE,
        },
    ),
    **_service(
        "SupervisorService",
        {
            "DeployAgent": AGENT_DEPLOY,
            "RemoveAgent": AGENT_DEPLOY,
            "StartAgent": AGENT_CONTROL,
            "StopAgent": AGENT_CONTROL,
            "RestartAgent": AGENT_CONTROL,
            "ScaleAgent": AGENT_CONTROL,
            "ListProcesses": AGENT_READ,
            "WatchEvents": AGENT_READ,
            # An agent's log lines can hold what its tasks read and wrote.
            "StreamLogs": AGENT_LOGS,
            "GetHostInfo": AGENT_READ,
        },
    ),
    **_service(
        "WorkflowService",
        {
            "CreateRun": WORKFLOW_RUN,
            "ResumeRun": WORKFLOW_RUN,
            "CancelRun": WORKFLOW_CANCEL,
            "GetRun": WORKFLOW_READ,
            "ListRuns": WORKFLOW_READ,
            "ListRunTasks": WORKFLOW_READ,
            "WaitRun": WORKFLOW_READ,
            "StreamRunEvents": WORKFLOW_READ,
            "GetRunReport": WORKFLOW_READ,
        },
    ),
    **_service(
        "TerminalService",
        {
            "CreateTerminal": TERMINAL_CREATE,
            "GetTerminal": TERMINAL_READ,
            "ListTerminals": TERMINAL_READ,
            "WatchTerminals": TERMINAL_READ,
            "ReadScreen": TERMINAL_READ,
            "WaitFor": TERMINAL_READ,
            "WriteInput": TERMINAL_WRITE,
            "Resize": TERMINAL_RESIZE,
            "SendSignal": TERMINAL_SIGNAL,
            "CloseTerminal": TERMINAL_CLOSE,
            "SetRecording": TERMINAL_WRITE,
            "GetRecording": TERMINAL_READ,
            # Input, resize and signal on an attach need their own rights as well.
            "Attach": TERMINAL_ATTACH,
        },
    ),
    **_service(
        "GatewayService",
        {
            "OpenSession": GATEWAY_SESSION,
            "GetSession": GATEWAY_SESSION,
            "ListSessions": GATEWAY_SESSION,
            "CloseSession": GATEWAY_SESSION,
            "Converse": GATEWAY_SESSION,
            "GetContext": GATEWAY_SESSION,
            "UpdateContext": GATEWAY_SESSION,
            "WatchContext": GATEWAY_SESSION,
            "SendMessage": GATEWAY_MESSAGE,
            "Publish": GATEWAY_MESSAGE,
            # Following a topic; an agent's mailbox needs gateway.admin as well.
            "Subscribe": GATEWAY_MESSAGE,
            "ListAudit": GATEWAY_AUDIT,
            "WatchAudit": GATEWAY_AUDIT,
        },
    ),
    # A2A (ether_host/a2a): each Ether agent is an A2A agent; every method reads or runs the
    # tasks of the agent its tenant names, so each needs agent.execute for that agent.
    **{f"/lf.a2a.v1.A2AService/{method}": AGENT_EXECUTE for method in A2A_METHODS},
}

# The methods whose right may be granted per agent (agent.execute:NAME): the call is let in
# with the right for some agent, and the servicer checks each input's agent (A2A: each
# tenant's, and each task's agent).
SCOPED_METHODS = frozenset(
    f"/ether.v1.AgentIOService/{method}" for method in ("Execute", "ExecuteStream", "Pipe")
) | frozenset(f"/lf.a2a.v1.A2AService/{method}" for method in A2A_METHODS)

# Answered without any credential, so load balancers and probes work.
OPEN_PREFIXES = ("/grpc.health.v1.Health/",)
# Needs a valid credential but no right: the API's shape is no secret from a known caller.
AUTHENTICATED_PREFIXES = ("/grpc.reflection.",)


# The routes of the HTTP listener (ether_host/http): path -> the right a request needs. A
# path matches its entry and everything below it (``/mcp`` covers ``/mcp/``); the longest entry
# wins. OPEN routes need no credential, AUTHENTICATED ones a valid credential and no right. A
# route mounted on the listener without an entry here stops the host at start (UnknownRoute).
OPEN = "open"
AUTHENTICATED = "authenticated"
HTTP_RIGHTS: Mapping[str, str] = {
    "/healthz": OPEN,  # mirrors grpc.health.v1.Health, answered to probes without a token
    "/readyz": OPEN,  # readiness for load balancers and probes, as /healthz
    # MCP tools are agent actions: the caller needs agent.execute for some agent, and sees and
    # calls the tools of the agents it may run (agent.execute:NAME narrows them).
    "/mcp": AGENT_EXECUTE,
    # A2A (ether_host/a2a): the host's card lists its agents, as ListAgents does; below /a2a
    # each agent's card and JSON-RPC need agent.execute for the agent of the URL.
    "/.well-known/agent-card.json": AGENT_READ,
    "/a2a": AGENT_EXECUTE,
    # Prometheus metrics (docs/telemetry.md): what ListAgents, ListProcesses and GetHostInfo
    # tell (agents, their states, replicas and load), counted; no task's params or data.
    "/metrics": AGENT_READ,
    # The web console (http/console.py): its page and assets hold no data (the sign-in form
    # loads without a token); its calls at /rpc (Connect) and /rpc-ws (the WebSocket bridge)
    # are RPCs, checked per method by the gRPC port's own decorators (METHOD_RIGHTS).
    "/": OPEN,
    "/console": OPEN,
    "/rpc": OPEN,
    "/rpc-ws": OPEN,
}
# Routes whose right may be granted per agent: let in with the right for some agent, and the
# handler checks each agent it touches (as SCOPED_METHODS).
SCOPED_ROUTES = frozenset({"/mcp", "/a2a"})


class UnknownRoute(Exception):
    """A route is mounted on the HTTP listener that HTTP_RIGHTS does not name."""


def route_entry(path: str) -> str | None:
    """The HTTP_RIGHTS entry that governs ``path`` (the longest one matching), or None."""
    best = None
    for entry in HTTP_RIGHTS:
        # "/" (the console's page) is that one path, not everything below it.
        covers = path == entry or (entry != "/" and path.startswith(entry.rstrip("/") + "/"))
        if covers and (best is None or len(entry) > len(best)):
            best = entry
    return best


class UnknownMethod(Exception):
    """A method is served that the table does not name: the host refuses to start."""


def right_of(method: str) -> str | None:
    """The right ``method`` needs; None for health and reflection; UnknownMethod otherwise,
    so a new RPC cannot be served before it is given a right."""
    right = METHOD_RIGHTS.get(method)
    if right is not None:
        return right
    if method.startswith(OPEN_PREFIXES + AUTHENTICATED_PREFIXES):
        return None
    raise UnknownMethod(f"{method} has no right in ether_host/rights.py METHOD_RIGHTS")


def require(identity: Identity, right: str, scope: str = "") -> None:
    """Raise PERMISSION_DENIED (reason MISSING_RIGHT, naming the right) unless ``identity``
    holds ``right`` (for ``scope``, when given: ``right:scope`` is enough)."""
    if identity.may(right, scope):
        return
    named = f"{right}:{scope}" if scope else right
    raise PermissionDenied(
        f"{identity.name} lacks the {right} right"
        + (f" for {scope!r} (grant {right} or {named})" if scope else ""),
        reason=Reason.MISSING_RIGHT,
        metadata={"right": right, **({"scope": scope} if scope else {})},
    )


def require_some(identity: Identity, right: str) -> None:
    """Raise unless ``identity`` holds ``right`` or ``right`` for some scope: the per-method
    check of a right the servicer also checks per scope (agent.execute:NAME)."""
    if identity.may(right) or any(held.startswith(right + ":") for held in identity.rights):
        return
    require(identity, right)
