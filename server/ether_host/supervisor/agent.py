"""A deployed agent: its install phase, its replicas, and slots for tasks."""

from __future__ import annotations

import itertools
import math
import platform
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from ether_host import __version__, containment
from ether_host.background import start_detached
from ether_host.bus import History
from ether_host.errors import FailedPrecondition, QuotaViolation, ResourceExhausted
from ether_host.link import own_task_fields
from ether_host.reasons import Reason
from ether_host.sandbox import Grant, SandboxPolicy
from ether_host.supervisor.install import InstallError, LaunchPlan, prepare
from ether_host.supervisor.manifest import AgentSpec
from ether_host.supervisor.records import LifecycleEvent, LogLine, State
from ether_host.supervisor.replica import Replica

if TYPE_CHECKING:
    from ether_host.supervisor.host import AgentHost

log = structlog.get_logger("ether.supervisor")

LOG_HISTORY = 5000
# One count for every agent: an agent deployed again under the same name never repeats a
# revision its predecessor had, whatever the two went through.
_REVISIONS = itertools.count()
LEGACY_ACTION = "run"
# Agent-level state when replicas disagree: the most useful one wins.
_PRECEDENCE = (
    State.RUNNING,
    State.STARTING,
    State.BACKOFF,
    State.STOPPING,
    State.FATAL,
    State.EXITED,
    State.STOPPED,
)


@dataclass
class ActionInfo:
    """An action as the directory shows it."""

    name: str
    description: str = ""
    params_schema: dict[str, Any] = field(default_factory=dict)
    idempotent: bool = False
    result_schema: dict[str, Any] = field(default_factory=dict)
    unusable: str = ""  # why it cannot be called (an MCP tool with a broken inputSchema)
    # Seconds its SUCCESS results are kept in the result cache (agents/result_cache.py); 0: none.
    cache_ttl: float = 0.0


class ManagedAgent:
    """Owns the replicas of one deployment and hands out task slots."""

    def __init__(self, host: AgentHost, spec: AgentSpec, grant: Grant | None) -> None:
        self.host = host
        self.spec = spec
        # What its sandbox may show it (host config narrowed by agent.toml); None: sandbox off.
        self.grant = grant
        self.replicas: list[Replica] = []
        self.plan: LaunchPlan | None = None
        self.version = ""
        self.description = spec.description
        self.actions: list[ActionInfo] = []
        self.max_concurrency = 1
        self.declared_calls: list[str] = []
        self.reason = ""
        self.logs: History[LogLine] = History(LOG_HISTORY)
        self.queued = 0
        # Moves on every change to what the directory shows of this agent except its load and
        # its replicas' readiness, which are read live (``load``): its hello (version,
        # description, actions, tags, kind, max_concurrency), the replicas wanted, its state.
        # The transport keeps each agent's encoded AgentInfo until it moves: a change that
        # does not move it is a stale ListAgents.
        self.revision = next(_REVISIONS)
        self._installing = False
        self._install_failed = False
        self._active = False
        # Set by stop() until the next run(): a scale up meanwhile adds no replica, which the
        # stop, having asked the ones it saw, would wait for forever.
        self._stopping = False
        self.removing = False  # a RemoveAgent is under way: nothing starts it again
        self._changed = anyio.Event()
        # acquire() calls waiting for a slot, oldest first: a freed slot wakes one of them, not
        # all (with hundreds queued behind a batched Pipe, waking all made each release cost
        # O(queued)); a change of state still wakes them all (_notify).
        self._slot_waiters: deque[anyio.Event] = deque()
        self._scope: anyio.CancelScope | None = None
        self._done = anyio.Event()
        self._done.set()
        self._replica_group: anyio.abc.TaskGroup | None = None
        # Replicas scaled away and still stopping, by index: a replica added later at the
        # same index starts once its predecessor is down (one process per index at a time).
        self._retiring: dict[int, Replica] = {}

    @property
    def name(self) -> str:
        return self.spec.name

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> State:
        if self._install_failed:
            return State.FATAL
        if self._installing:
            return State.INSTALLING
        states = {r.state for r in self.replicas}
        for state in _PRECEDENCE:
            if state in states:
                if state is State.FATAL and len(states) > 1 and self._active:
                    continue
                return state
        return State.STOPPED

    @property
    def ready_replicas(self) -> int:
        return sum(1 for r in self.replicas if r.ready)

    @property
    def in_flight(self) -> int:
        return sum(r.assigned for r in self.replicas) + sum(
            r.assigned for r in self._retiring.values()
        )

    def _revise(self) -> None:
        self.revision = next(_REVISIONS)

    def load(self) -> tuple[int, int]:
        """``ready_replicas`` and ``in_flight`` in one pass: what ListAgents reads of each agent
        on every call (its entry's other fields are kept until ``revision`` moves)."""
        ready = in_flight = 0
        for replica in self.replicas:
            in_flight += replica.assigned
            if replica.ready:
                ready += 1
        for replica in self._retiring.values():  # empty unless a scale-down is still stopping
            in_flight += replica.assigned
        return ready, in_flight

    def _notify(self) -> None:
        self._revise()  # every replica's state change and the agent's own come through here
        self._changed.set()
        self._changed = anyio.Event()
        waiters, self._slot_waiters = self._slot_waiters, deque()
        for waiter in waiters:
            waiter.set()

    def _wake_one(self) -> None:
        if self._slot_waiters:
            self._slot_waiters.popleft().set()

    def publish_state(
        self, replica: Replica | None, previous: State, reason: str, **extra: Any
    ) -> None:
        index = -1 if replica is None else replica.index
        state = self.state if replica is None else replica.state
        event = LifecycleEvent(self.name, index, state, previous, reason, **extra)
        self.host.events.append(event)
        log.info(
            "agent state",
            agent=self.name,
            replica=index,
            state=state.value,
            previous=previous.value,
            reason=reason,
            pid=extra.get("pid", 0),
        )
        self._notify()

    def log_line(
        self,
        replica: Replica | None,
        source: str,
        level: str,
        message: str,
        fields: dict[str, Any] | None = None,
    ) -> None:
        self.logs.append(
            LogLine(
                self.name,
                -1 if replica is None else replica.index,
                0 if replica is None else replica.pid,
                source,
                level,
                message,
                fields or {},
            )
        )

    def log_frame(self, replica: Replica, frame: dict[str, Any]) -> None:
        fields = dict(frame.get("fields") or {})
        if frame.get("task_id"):
            fields.setdefault(
                "frame_id", frame["task_id"]
            )  # the link's id (h-N), not the public task id
            pending = (
                replica.connection.pending(str(frame["task_id"])) if replica.connection else None
            )
            if pending is not None:  # its public task id, and its trace id when traced
                fields.update(own_task_fields(pending))
        self.log_line(
            replica, "log", str(frame.get("level") or "info"), str(frame.get("msg") or ""), fields
        )

    # -- handshake -----------------------------------------------------------------------

    def welcome_frame(self, hello: dict[str, Any]) -> dict[str, Any]:
        capabilities = hello.get("capabilities") or {}
        return {
            "host_version": __version__,
            "max_in_flight": max(1, int(capabilities.get("max_concurrency") or 1)),
            "config": self.spec.config,
            "log_level": "info",
            "agent_name": self.name,
        }

    def accept_hello(self, hello: dict[str, Any] | None) -> None:
        self._revise()
        if hello is None:
            self.actions = [
                ActionInfo(LEGACY_ACTION, "Runs the agent's single task handler (seeds' envelope).")
            ]
            self.max_concurrency = 1
            return
        identity = hello.get("agent") or {}
        self.version = str(identity.get("version") or "")
        self.description = self.spec.description or str(identity.get("description") or "")
        self.actions = [
            ActionInfo(
                str(a.get("name")),
                str(a.get("description") or ""),
                dict(a.get("params_schema") or {}),
                bool(a.get("idempotent")),
                dict(a.get("result_schema") or {}),
                str(a.get("unusable") or ""),
                _cache_ttl(a.get("cache_ttl")),
            )
            for a in hello.get("actions") or []
            if a.get("name")
        ]
        capabilities = hello.get("capabilities") or {}
        self.max_concurrency = max(1, int(capabilities.get("max_concurrency") or 1))
        self.declared_calls = [str(c) for c in capabilities.get("calls") or []]
        tags = identity.get("tags") or []
        self.tags = [str(t) for t in tags]
        if identity.get("kind") == "io_gateway" and self.spec.kind == "general":
            self.spec.kind = "io_gateway"

    @property
    def capability_tags(self) -> list[str]:
        return sorted(set(self.spec.capabilities) | set(getattr(self, "tags", [])))

    @property
    def allowed_calls(self) -> set[str]:
        """Declared by the agent and granted by its deployment (patterns such as ``ctx.*``)."""
        granted = self.spec.allowed_calls
        return {
            c for c in self.declared_calls if any(_matches(c, g) or _matches(g, c) for g in granted)
        }

    def may_call(self, method: str) -> bool:
        """True when the agent declared ``method`` in hello and its deployment grants it."""
        declared = any(_matches(method, pattern) for pattern in self.declared_calls)
        return declared and any(_matches(method, pattern) for pattern in self.spec.allowed_calls)

    # -- running -------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._active

    async def stop_finished(self) -> None:
        """Wait until a stop under way has ended the agent's run (at once when none is)."""
        if self._stopping:
            with anyio.CancelScope(shield=True):  # as stop(): the caller starts it next
                await self._done.wait()

    def begin(self) -> None:
        """Running from now, before run() (scheduled next) takes its first step: a second
        start then starts nothing, and a stop waits for run(), which ends at once."""
        self._active = True
        self._stopping = False
        self._done = anyio.Event()
        self._install_failed = False

    async def run(self) -> None:
        """Install, then keep the replicas running until stopped. Owned by the supervisor,
        which calls begin() first."""
        self._revise()
        try:
            if self._stopping:  # stopped before its first step
                return
            with anyio.CancelScope() as scope:
                self._scope = scope
                if not await self._install():
                    return
                async with anyio.create_task_group() as tg:
                    self._replica_group = tg
                    self.replicas = [Replica(self, i, self.host) for i in range(self.spec.replicas)]
                    self._revise()
                    for replica in self.replicas:
                        tg.start_soon(self._run_replica, replica)
        finally:
            self._replica_group = None
            self._active = False
            self._scope = None
            self._done.set()
            self._notify()

    async def _install(self) -> bool:
        self._installing = True
        self.publish_state(
            None, State.STOPPED, f"installing {self.spec.language} agent from {self.spec.path}"
        )
        try:
            self.plan = await prepare(
                self.spec,
                self.host.state_dir,
                lambda line: self.log_line(None, "install", "info", line),
                self.host.children,
            )
        except InstallError as error:
            self._installing = False
            self._install_failed = True
            self.reason = f"install failed: {error}"
            self.log_line(None, "install", "error", self.reason)
            self.publish_state(None, State.INSTALLING, self.reason)
            return False
        self._installing = False
        self._revise()
        missing = self._sandbox_missing()
        if missing:
            self._install_failed = True
            self.reason = missing
            self.log_line(None, "install", "error", missing)
            self.publish_state(None, State.INSTALLING, missing)
            return False
        self.reason = ""
        return True

    def _sandbox_missing(self) -> str:
        """Why this agent must not start, when its sandbox is required and the machine cannot
        make one (fail closed); empty otherwise."""
        if self.grant is None or self.host.sandbox.mode != "required":
            return ""
        contained = containment.probe()
        if contained.can_sandbox:
            return ""
        return (
            'sandbox required (host config [sandbox] mode = "required") but this machine '
            f"cannot make one: {contained.sandbox_why_not or contained.why_not}; install "
            'bubblewrap (make terminal-tools) or set [sandbox] mode = "auto" or "off"'
        )

    async def sandbox_policy(self, replica: int) -> SandboxPolicy | None:
        """The sandbox of one replica's next process, with a fresh (or kept) scratch
        directory; None when sandboxes are off."""
        if self.grant is None or self.plan is None:
            return None
        settings = self.host.sandbox
        scratch = await anyio.to_thread.run_sync(
            settings.scratch, self.host.state_dir, self.name, str(replica)
        )
        return SandboxPolicy(
            scratch=str(scratch),
            cwd=str(self.plan.cwd),
            read_only=(*self.plan.read_only, *self.grant.read_only),
            read_write=self.grant.read_write,
            network=self.grant.network,
        )

    async def stop(self, grace: float | None = None) -> None:
        """Stop every replica (three-phase, shielded) and wait until they are down."""
        with anyio.CancelScope(shield=True):
            self._stopping = True
            if self._installing and self._scope is not None:
                self._scope.cancel()
            for replica in self.replicas:
                replica.request_stop(grace)
            await self._done.wait()

    async def _run_replica(self, replica: Replica, predecessor: Replica | None = None) -> None:
        try:
            if predecessor is not None:
                await predecessor.done.wait()
            await replica.run()
        finally:
            if self._retiring.get(replica.index) is replica:
                del self._retiring[replica.index]
            self._notify()

    async def scale(self, replicas: int) -> None:
        """Run ``replicas`` processes: start the missing replicas and stop the extra ones,
        waiting (shielded, like a stop) until those are down.

        The agent's replicas are then exactly ``0 .. replicas-1``: a replica scaled away leaves
        the list at once (its stop goes on in the background of this call), so a later scale up
        adds a new replica at that index instead of counting the stopping one. A replica added
        is STARTING at once (Replica), in this call's answer too. An agent not running, or
        stopping, gets none added (run() makes them when it starts): a stopped one keeps
        showing the replicas it had, STOPPED, rather than ones nothing is starting.
        """
        self.spec.replicas = replicas
        self._revise()
        group = self._replica_group
        if group is None or self._stopping:  # not running: run() starts spec.replicas fresh ones
            if not self._active:
                self.replicas = self.replicas[:replicas]
            return
        kept, retired = self.replicas[:replicas], self.replicas[replicas:]
        for index in range(len(kept), replicas):
            replica = Replica(self, index, self.host)
            kept.append(replica)
            # Not in the context of the ScaleAgent call: the replica outlives it.
            start_detached(group, self._run_replica, replica, self._retiring.get(index))
        for replica in retired:
            self._retiring[replica.index] = replica
            replica.request_stop()
        self.replicas = kept
        self._notify()
        with anyio.CancelScope(shield=True):
            # Until each is down, or the agent itself has ended (a replica cancelled before
            # it ever ran never sets its done).
            while self._active and not all(r.done.is_set() for r in retired):
                await self._changed.wait()

    # -- slots ---------------------------------------------------------------------------

    def try_acquire(self, *, reentrant: bool = False) -> Replica | None:
        """A running replica with a free slot (least loaded), or None when every slot is taken.

        ``reentrant`` admits a task past the concurrency limit: it is a call
        made, directly or not, by a task already running on this agent,
        which would otherwise wait for its own ancestor until its deadline.
        """
        best: Replica | None = None
        if self._active:
            for replica in self.replicas:
                if (
                    replica.ready
                    and (reentrant or replica.assigned < replica.max_concurrency)
                    and (best is None or replica.assigned < best.assigned)
                ):
                    best = replica
        if best is None:
            self._check_active()
            return None
        best.assigned += 1
        return best

    async def acquire(self, *, reentrant: bool = False) -> Replica:
        """A running replica with a free slot (least loaded); waits while none is free."""
        if self.queued >= self.spec.max_queue:
            raise ResourceExhausted(
                f"agent {self.name} has {self.queued} tasks queued (limit {self.spec.max_queue}); retry later",
                reason=Reason.AGENT_QUEUE_FULL,
                retry_after=1.0,
                resource=("agent", self.name),
                metadata={"limit": str(self.spec.max_queue)},
                quota_violations=[
                    QuotaViolation(
                        f"agent:{self.name}", f"at most {self.spec.max_queue} tasks queued"
                    )
                ],
            )
        self.queued += 1
        try:
            while (replica := self.try_acquire(reentrant=reentrant)) is None:
                woken = anyio.Event()
                self._slot_waiters.append(woken)
                try:
                    await woken.wait()
                except BaseException:  # cancelled (a deadline, the caller gone)
                    if woken.is_set():
                        self._wake_one()  # woken for a slot it will not take: pass it on
                    else:
                        self._slot_waiters.remove(woken)
                    raise
            return replica
        finally:
            self.queued -= 1

    def _check_active(self) -> None:
        state = self.state
        if not self._active or state is State.FATAL:
            detail = (
                f": {self.reason or self._replica_reason()}"
                if state in (State.FATAL, State.EXITED)
                else ""
            )
            raise FailedPrecondition(
                f"agent {self.name} is {state.value}{detail}; start it with SupervisorService.StartAgent",
                reason=Reason.AGENT_NOT_RUNNING,
                resource=("agent", self.name),
                metadata={"state": state.value},
            )

    def release(self, replica: Replica) -> None:
        replica.assigned -= 1
        self._wake_one()

    def _replica_reason(self) -> str:
        return next((r.reason for r in self.replicas if r.reason), "")

    def status_reason(self) -> str:
        if self.reason:
            return self.reason
        fatal = [r for r in self.replicas if r.state in (State.FATAL, State.EXITED, State.BACKOFF)]
        if fatal:
            replica = fatal[0]
            tail = "\n".join(list(replica.stderr_tail)[-5:])
            return f"{replica.reason}" + (f"\nstderr:\n{tail}" if tail else "")
        return ""

    def host_name(self) -> str:
        return platform.node()


def _matches(method: str, pattern: str) -> bool:
    if pattern.endswith(".*"):
        return method.startswith(pattern[:-1])
    return method == pattern or pattern == "*"


def _cache_ttl(declared: Any) -> float:
    """An action's ``cache_ttl`` from hello: seconds, 0 when absent or not a positive number."""
    if isinstance(declared, bool) or not isinstance(declared, int | float):
        return 0.0
    return float(declared) if 0 < declared < math.inf else 0.0
