"""The supervisor: deploys agents and owns every agent task in one task group."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from anyio.abc import TaskStatus

from ether_host.background import start_detached
from ether_host.bus import History
from ether_host.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from ether_host.link.connection import DEFAULT_MAX_FRAME
from ether_host.procs import ChildRegistry
from ether_host.resources import Resources, narrow
from ether_host.sandbox import Grant, SandboxSettings
from ether_host.supervisor.agent import ManagedAgent
from ether_host.supervisor.manifest import MANIFEST, MARKERS, AgentSpec, build_spec
from ether_host.supervisor.records import LifecycleEvent

if TYPE_CHECKING:
    from ether_host.link import AgentConnection

log = structlog.get_logger("ether.supervisor")

EVENT_HISTORY = 1000
STOP_ALL_DEADLINE = 15.0
CallHandler = Callable[["AgentConnection", dict[str, Any]], Awaitable[Any]]


class Supervisor:
    """Deploy, start, stop and watch agents."""

    def __init__(
        self,
        state_dir: Path,
        children: ChildRegistry,
        max_frame: int = DEFAULT_MAX_FRAME,
        sandbox: SandboxSettings | None = None,
    ) -> None:
        self.state_dir = state_dir.absolute()
        self.sandbox = sandbox or SandboxSettings()
        self.children = children
        self.max_frame = max_frame
        self.agents: dict[str, ManagedAgent] = {}
        self.events: History[LifecycleEvent] = History(EVENT_HISTORY)
        self._call_handler: CallHandler | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        # Memory, processes, files and CPU of each replica (the host's: wired by main).
        self.resources = Resources.unlimited()

    def serve_calls_with(self, handler: CallHandler) -> None:
        """Set who answers agents' host calls (the agents layer; wired by main)."""
        self._call_handler = handler

    async def handle_call(self, connection: AgentConnection, frame: dict[str, Any]) -> Any:
        if self._call_handler is None:
            raise RuntimeError("no call handler wired")
        return await self._call_handler(connection, frame)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the agents' tasks until cancelled; stop them all on the way out."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None

    # -- operations ----------------------------------------------------------------------

    def get(self, name: str) -> ManagedAgent:
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise NotFound(
                f"no agent named {name!r} (deployed: {known})",
                reason="AGENT_NOT_FOUND",
                resource=("agent", name),
            )
        return agent

    def deploy(self, request: dict[str, Any]) -> ManagedAgent:
        spec = build_spec(request)
        narrow(self.resources.settings.agents, spec.limits)  # FAILED_PRECONDITION above the host's
        if spec.name in self.agents:
            raise AlreadyExists(
                f"an agent named {spec.name!r} is already deployed; remove it first",
                reason="AGENT_EXISTS",
                resource=("agent", spec.name),
            )
        agent = ManagedAgent(self, spec, self._grant(spec))
        self.agents[spec.name] = agent
        self._start(agent)
        return agent

    def _grant(self, spec: AgentSpec) -> Grant | None:
        """What the agent's sandbox may show it; PermissionDenied when its agent.toml asks for
        more than the host config allows. None when the host config turns sandboxes off."""
        grant = self.sandbox.narrow(spec.name, spec.sandbox)
        return None if self.sandbox.mode == "off" else grant

    def _start(self, agent: ManagedAgent) -> None:
        assert self._tg is not None, "supervisor is not running"
        # Not in the context of the RPC that deployed or started it: the agent outlives it.
        start_detached(self._tg, agent.run, name=f"agent {agent.name}")

    async def start(self, name: str) -> ManagedAgent:
        agent = self.get(name)
        if not agent.active:
            self._start(agent)
        return agent

    async def stop(self, name: str, grace: float | None = None) -> ManagedAgent:
        agent = self.get(name)
        await agent.stop(grace)
        return agent

    async def restart(self, name: str) -> ManagedAgent:
        agent = await self.stop(name)
        self._start(agent)
        return agent

    async def remove(self, name: str) -> None:
        agent = await self.stop(name)
        self.agents.pop(agent.name, None)

    async def scale(self, name: str, replicas: int) -> ManagedAgent:
        """Set the replicas; returns once the replicas scaled away are down."""
        if not 1 <= replicas <= 64:
            raise InvalidArgument(
                f"replicas: {replicas} is out of range 1..64", reason="INVALID_REPLICAS"
            )
        agent = self.get(name)
        await agent.scale(replicas)
        return agent

    async def stop_all(self) -> None:
        """Stop every agent in parallel under one deadline (host shutdown)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_ALL_DEADLINE):
            async with anyio.create_task_group() as tg:
                for agent in list(self.agents.values()):
                    tg.start_soon(agent.stop)

    def deploy_configured(self, entries: list[dict[str, Any]], agents_dir: str) -> None:
        """Deploy the agents named in the config file and found in the agents directory."""
        requests = [dict(entry) for entry in entries]
        if agents_dir:
            root = Path(agents_dir)
            if not root.is_dir():
                raise InvalidArgument(
                    f"agents_dir: {root} is not a directory", reason="INVALID_CONFIG"
                )
            markers = {MANIFEST, *(m for files in MARKERS.values() for m in files)}
            for folder in sorted(p for p in root.iterdir() if p.is_dir()):
                if any((folder / m).exists() for m in markers):
                    requests.append({"path": str(folder.absolute())})
        for request in requests:
            try:
                self.deploy(request)
            except (InvalidArgument, AlreadyExists, FailedPrecondition, PermissionDenied) as error:
                log.error("agent not deployed", path=request.get("path"), error=str(error))
