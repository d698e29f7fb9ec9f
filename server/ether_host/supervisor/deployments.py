"""The supervisor: deploys agents and owns every agent task in one task group.

What an operator asked of the agents deployed by request (deploy, scale, stop, start, remove)
is desired state: recorded in the agent store before the call answers, and deployed again by
the next host on the same state directory (``deploy_at_start``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import structlog
from anyio.abc import TaskStatus

from ether_host.background import Abandoned, run_to_the_end, start_detached
from ether_host.bus import History
from ether_host.errors import (
    AlreadyExists,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from ether_host.link import DEFAULT_MAX_FRAME
from ether_host.paging import Page, paginate
from ether_host.procs import ChildRegistry
from ether_host.reasons import Reason
from ether_host.resources import Resources, narrow
from ether_host.sandbox import Grant, SandboxSettings
from ether_host.supervisor.agent import ManagedAgent
from ether_host.supervisor.manifest import MANIFEST, MARKERS, AgentSpec, build_spec
from ether_host.supervisor.records import LifecycleEvent, LogLine
from ether_host.supervisor.replica import Replica
from ether_host.supervisor.store import AgentStore, SavedAgent, StoreClosed, spec_json

if TYPE_CHECKING:
    from ether_host.link import AgentConnection

log = structlog.get_logger("ether.supervisor")
Done = TypeVar("Done")

EVENT_HISTORY = 1000
DEFAULT_TAIL = 100  # log lines a StreamLogs without tail_lines starts with
MAX_TAIL = 10000
STOP_ALL_DEADLINE = 15.0
CallHandler = Callable[["AgentConnection", dict[str, Any]], Awaitable[Any]]


class Supervisor:
    """Deploy, start, stop and watch agents."""

    def __init__(
        self,
        state_dir: Path,
        children: ChildRegistry,
        max_frame: int = DEFAULT_MAX_FRAME,
        store: AgentStore | None = None,
        sandbox: SandboxSettings | None = None,
    ) -> None:
        self.state_dir = state_dir.absolute()
        self.sandbox = sandbox or SandboxSettings()
        self.children = children
        self.max_frame = max_frame
        self.store = store or AgentStore(self.state_dir / "agents.sqlite3")
        self.agents: dict[str, ManagedAgent] = {}
        # Names deployed from the host config or agents_dir (the operator's file: not recorded)
        # and names stopped by StopAgent (recorded so; they come back stopped).
        self._configured: set[str] = set()
        # Config entries the host could not deploy at start (a bad agent.toml, a missing
        # folder), by the name they would run under: until one of that name is deployed, the
        # host is not ready (configured_to_run).
        self._not_deployed: set[str] = set()
        self._stopped: set[str] = set()
        self._saved: list[SavedAgent] = []
        self._recording = anyio.Lock()
        self._next_commit = _Commit()  # the changes the next write takes (_record)
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
        self._saved = await anyio.to_thread.run_sync(self.store.open)
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None
            # Closed once no change is being written: a RemoveAgent answered while the host
            # stops is recorded, or refused as the host stopping, never cut off mid-write.
            with anyio.CancelScope(shield=True):
                async with self._recording:
                    self.store.close()

    # -- operations ----------------------------------------------------------------------

    def list_agents(
        self,
        page_size: int,
        page_token: str,
        *,
        capability: str = "",
        language: str = "",
        kind: str = "",
    ) -> Page[ManagedAgent]:
        """One page of the agents by name: those with ``capability`` (a capability tag or an
        action of that name), of ``language`` and of ``kind``, each filter when not empty."""
        agents = [
            a
            for a in self.agents.values()
            if (
                not capability
                or capability in a.capability_tags
                or any(x.name == capability for x in a.actions)
            )
            and (not language or a.spec.language == language)
            and (not kind or a.spec.kind == kind)
        ]
        scope = f"agents/{capability}/{language}/{kind}"
        return paginate(agents, page_size, page_token, scope, key=lambda a: (a.name,))

    def list_processes(self, agent: str, page_size: int, page_token: str) -> Page[Replica]:
        """One page of the replicas of ``agent`` (of every agent when empty), by agent and index."""
        agents = [self.get(agent)] if agent else list(self.agents.values())
        replicas = [r for a in agents for r in a.replicas]
        return paginate(
            replicas,
            page_size,
            page_token,
            f"processes/{agent}",
            key=lambda r: (r.agent.name, r.index),
        )

    def log_tail(self, name: str, lines: int) -> tuple[ManagedAgent, list[tuple[int, LogLine]]]:
        """The agent and its last ``lines`` log lines with their sequence numbers (0 asks for
        DEFAULT_TAIL; up to MAX_TAIL); its ``logs`` History follows on from the last."""
        if not 0 <= lines <= MAX_TAIL:
            raise InvalidArgument(
                f"tail_lines {lines} is out of range 0..{MAX_TAIL}",
                reason=Reason.INVALID_TAIL,
                violations=[FieldViolation("tail_lines", f"0 to {MAX_TAIL}")],
            )
        agent = self.get(name)
        return agent, agent.logs.tail(lines or DEFAULT_TAIL)

    def configured_to_run(self) -> list[str]:
        """The agents the host config (its [[agents]] and agents_dir) names and no StopAgent
        has stopped since, deployed or not (refused at start): the ones a ready host runs
        (``/readyz``)."""
        deployed = (n for n in self._configured - self._stopped if n in self.agents)
        refused = (n for n in self._not_deployed if n not in self.agents)
        return sorted({*deployed, *refused})

    def get(self, name: str) -> ManagedAgent:
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise NotFound(
                f"no agent named {name!r} (deployed: {known})",
                reason=Reason.AGENT_NOT_FOUND,
                resource=("agent", name),
            )
        return agent

    async def _to_the_end(self, function: Callable[..., Awaitable[Done]], *args: Any) -> Done:
        """Run a change of what is wanted (deploy, start, stop, restart, remove, scale) to its
        end and its record, whether or not its caller waits that long: a StopAgent whose
        deadline passed while the agent stopped was otherwise not recorded, and a host
        restarted after it ran the agent again (background.run_to_the_end says why a shield
        does not do)."""
        try:
            return await run_to_the_end(self._tg, function, *args)
        except Abandoned:
            raise _stopping("the change was not finished") from None

    @staticmethod
    def _not_removing(agent: ManagedAgent) -> ManagedAgent:
        """``agent``, unless a RemoveAgent is under way for it: a start or restart racing the
        removal's stop must not run it again behind it (it would run, out of the directory)."""
        if agent.removing:
            raise NotFound(
                f"agent {agent.name!r} is being removed",
                reason=Reason.AGENT_NOT_FOUND,
                resource=("agent", agent.name),
            )
        return agent

    async def deploy(self, request: dict[str, Any]) -> ManagedAgent:
        """Deploy and start an agent; recorded before this returns."""
        return await self._to_the_end(self._deploy_recorded, request)

    async def _deploy_recorded(self, request: dict[str, Any]) -> ManagedAgent:
        agent = self._deploy(request)
        try:
            await self._record(agent.name)
        except Unavailable:
            await agent.stop()  # not recorded: not deployed either
            if self.agents.get(agent.name) is agent:
                del self.agents[agent.name]
            raise
        return agent

    def _deploy(self, request: dict[str, Any], *, configured: bool = False) -> ManagedAgent:
        spec = build_spec(request)
        narrow(self.resources.settings.agents, spec.limits)  # FAILED_PRECONDITION above the host's
        if self._tg is None:
            raise _stopping(f"agent {spec.name} was not deployed")
        if spec.name in self.agents:
            raise AlreadyExists(
                f"an agent named {spec.name!r} is already deployed; remove it first",
                reason=Reason.AGENT_EXISTS,
                resource=("agent", spec.name),
            )
        agent = ManagedAgent(self, spec, self._grant(spec))
        self.agents[spec.name] = agent
        # A config entry refused at start is waited for until an agent of its name is
        # deployed (docs/health.md), not again once that one is removed.
        self._not_deployed.discard(spec.name)
        if configured:
            self._configured.add(spec.name)
        else:
            self._configured.discard(spec.name)
        self._stopped.discard(spec.name)
        self._start(agent)
        return agent

    def _grant(self, spec: AgentSpec) -> Grant | None:
        """What the agent's sandbox may show it; PermissionDenied when its agent.toml asks for
        more than the host config allows. None when the host config turns sandboxes off."""
        grant = self.sandbox.narrow(spec.name, spec.sandbox)
        return None if self.sandbox.mode == "off" else grant

    async def _record(self, name: str) -> None:
        """Write what is now wanted of ``name`` to the agent store: its spec and whether it
        runs, or nothing once removed; returns once that is committed. Shielded, so a caller
        that goes away does not leave a change unrecorded.

        Group commit: each commit is synced to the disk, and calls made at once (a script
        deploying or removing many agents) would otherwise wait for one sync each in turn.
        The caller that holds the lock writes every change waiting then (rows read under the
        lock: the latest state of each name); a caller whose change went out in that commit
        finds it done when its turn comes. The lock is FIFO: no caller writes more than one
        commit. (Measured on this machine kind, whose syncs take ~4 ms, 300 deploys or removes
        8 at a time showed no difference beyond the noise; a disk with slow syncs would.)"""
        with anyio.CancelScope(shield=True):
            mine = self._next_commit
            mine.names.add(name)
            async with self._recording:
                if not mine.written:
                    self._next_commit = _Commit()
                    await self._write(mine)
            if isinstance(mine.error, StoreClosed):
                raise _stopping(f"agent {name}: the change was not recorded")
            if mine.error is not None:
                raise Unavailable(
                    f"agent {name}: the change could not be recorded in {self.store.path} "
                    f"({mine.error}); a restarted host would not know it",
                    reason=Reason.AGENT_NOT_RECORDED,
                    resource=("agent", name),
                )

    async def _write(self, commit: _Commit) -> None:
        """One transaction of the rows of ``commit.names`` (under the lock)."""
        rows = {}
        for name in commit.names:
            agent = self.agents.get(name)
            rows[name] = (
                None
                if agent is None or name in self._configured
                else (spec_json(agent.spec), name not in self._stopped)
            )
        try:
            await anyio.to_thread.run_sync(self.store.put, rows)
        except StoreClosed as error:
            commit.error = error
        except sqlite3.Error as error:
            log.error("agent change not recorded", agents=sorted(rows), error=str(error))
            commit.error = error
        finally:
            commit.written = True

    def _start(self, agent: ManagedAgent) -> None:
        """Run ``agent`` unless it runs already (two starts racing start one run)."""
        if self._tg is None:
            raise _stopping(f"agent {agent.name} was not started")
        if agent.active:
            return
        agent.begin()
        # Not in the context of the RPC that deployed or started it: the agent outlives it.
        start_detached(self._tg, agent.run, name=f"agent {agent.name}")

    async def start(self, name: str) -> ManagedAgent:
        """Start a stopped agent; one a stop is under way for is started once that stop has
        ended (a start asked later than a stop wins, as in the record)."""
        return await self._to_the_end(self._start_recorded, name)

    async def _start_recorded(self, name: str) -> ManagedAgent:
        agent = self._not_removing(self.get(name))
        self._stopped.discard(name)
        await agent.stop_finished()
        if name not in self._stopped:  # no stop asked for since
            self._start(self._not_removing(agent))
        await self._record(name)
        return agent

    async def stop(self, name: str, grace: float | None = None) -> ManagedAgent:
        """Stop an agent; it stays stopped, across a host restart too, until started."""
        return await self._to_the_end(self._stop_recorded, name, grace)

    async def _stop_recorded(self, name: str, grace: float | None) -> ManagedAgent:
        agent = self.get(name)
        self._stopped.add(name)
        await agent.stop(grace)
        await self._record(name)
        return agent

    async def restart(self, name: str) -> ManagedAgent:
        return await self._to_the_end(self._restart_recorded, name)

    async def _restart_recorded(self, name: str) -> ManagedAgent:
        agent = self._not_removing(self.get(name))
        await agent.stop()
        self._stopped.discard(name)
        self._start(self._not_removing(agent))
        await self._record(name)
        return agent

    async def remove(self, name: str) -> None:
        await self._to_the_end(self._remove_recorded, name)

    async def _remove_recorded(self, name: str) -> None:
        agent = self.get(name)
        agent.removing = True
        await agent.stop()
        if self.agents.get(name) is agent:
            del self.agents[name]
            self._configured.discard(name)
            self._stopped.discard(name)
            # Once it is out of the directory, so that a follower of WatchEvents (the MCP
            # fronts' tools/list_changed) that lists agents on this event no longer sees it.
            agent.publish_state(None, agent.state, "removed")
        await self._record(name)

    async def scale(self, name: str, replicas: int) -> ManagedAgent:
        """Set the replicas; returns once the replicas scaled away are down."""
        return await self._to_the_end(self._scale_recorded, name, replicas)

    async def _scale_recorded(self, name: str, replicas: int) -> ManagedAgent:
        if not 1 <= replicas <= 64:
            raise InvalidArgument(
                f"replicas: {replicas} is out of range 1..64", reason=Reason.INVALID_REPLICAS
            )
        agent = self.get(name)
        await agent.scale(replicas)
        await self._record(name)
        return agent

    async def stop_all(self) -> None:
        """Stop every agent in parallel under one deadline (host shutdown)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_ALL_DEADLINE):
            async with anyio.create_task_group() as tg:
                for agent in list(self.agents.values()):
                    tg.start_soon(agent.stop)

    async def deploy_at_start(self, entries: list[dict[str, Any]], agents_dir: str) -> None:
        """Deploy the agents named in the config file and found in the agents directory, then
        the ones recorded by the last host. The file wins: a recorded agent of the same name
        is dropped from the record (with a warning) and the file's one runs."""
        for request in _configured_requests(entries, agents_dir):
            try:
                self._deploy(request, configured=True)
            except (InvalidArgument, AlreadyExists, FailedPrecondition, PermissionDenied) as error:
                log.error("agent not deployed", path=request.get("path"), error=str(error))
                self._not_deployed.add(_entry_name(request))
        saved, self._saved = self._saved, []
        for record in saved:
            name = record.spec.name
            if name in self._configured:
                log.warning(
                    "recorded agent replaced by the host config's",
                    agent=name,
                    recorded_path=str(record.spec.path),
                    configured_path=str(self.agents[name].spec.path),
                )
                with contextlib.suppress(Unavailable):  # logged; the file's agent runs anyway
                    await self._record(name)  # forgets the recorded one
                continue
            try:  # the host config may have lowered its limits since
                narrow(self.resources.settings.agents, record.spec.limits)
            except FailedPrecondition as error:
                log.error("recorded agent not deployed", agent=name, error=str(error))
                continue
            try:
                grant = self._grant(record.spec)
            except PermissionDenied as error:  # the host config changed since
                log.error("recorded agent not deployed", agent=name, error=str(error))
                continue
            agent = self.agents[name] = ManagedAgent(self, record.spec, grant)
            if record.running:
                self._start(agent)
            else:
                self._stopped.add(name)
            log.info(
                "agent restored",
                agent=name,
                path=str(record.spec.path),
                replicas=record.spec.replicas,
                running=record.running,
            )


def _entry_name(request: dict[str, Any]) -> str:
    """The name a config entry the host could not deploy is known by: its ``name``, else its
    folder's (an agent's default name)."""
    name = request.get("name")
    if isinstance(name, str) and name:
        return name
    return Path(str(request.get("path", ""))).name or "(an [[agents]] entry without a path)"


def _configured_requests(entries: list[dict[str, Any]], agents_dir: str) -> list[dict[str, Any]]:
    """The config file's [[agents]], then every agent folder in ``agents_dir``."""
    requests = [dict(entry) for entry in entries]
    if agents_dir:
        root = Path(agents_dir)
        if not root.is_dir():
            raise InvalidArgument(
                f"agents_dir: {root} is not a directory", reason=Reason.INVALID_CONFIG
            )
        markers = {MANIFEST, *(m for files in MARKERS.values() for m in files)}
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            if any((folder / m).exists() for m in markers):
                requests.append({"path": str(folder.absolute())})
    return requests


class _Commit:
    """The changes that go to the agent store in one transaction (Supervisor._record)."""

    __slots__ = ("error", "names", "written")

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.written = False
        self.error: Exception | None = None


def _stopping(what: str) -> Unavailable:
    """The refusal of a change that comes while the supervisor is not running (the host is
    starting or stopping)."""
    return Unavailable(
        f"{what}: the host is stopping (or not started yet); try again on a running host",
        reason=Reason.HOST_STOPPING,
    )
