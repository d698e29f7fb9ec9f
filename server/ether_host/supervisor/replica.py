"""One replica of an agent: spawn, handshake, serve, exit, and restart by policy.

The loop follows supervisor-anchors P1-P11: a death before the process said
hello and stayed up ``stable_after`` is a start failure (``start_retries``
then FATAL); later deaths back off exponentially with jitter, the counter
resets after ``reset_after`` of health, and more than ``max_restarts`` in
``restart_period`` is FATAL. Exit 78 and a ``fatal`` frame are FATAL at once.
Stops run shielded: shutdown frame + stdin EOF, SIGTERM to the group, then
SIGKILL to the group, then reap.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from ether_host.link import (
    MAX_STDERR_LINE,
    PROTOCOL_VERSIONS,
    AgentConnection,
    HandshakeError,
    LineSplitter,
    LinkClosed,
    McpConnection,
    Oversized,
    ProtocolMismatch,
    StderrParser,
    task_fields,
)
from ether_host.procs import group_gone, group_members, kill_group, set_cpu_policy
from ether_host.supervisor.environment import agent_environment
from ether_host.supervisor.pipes import open_agent_process
from ether_host.supervisor.records import State

if TYPE_CHECKING:
    from ether_host.resources import Group
    from ether_host.supervisor.agent import ManagedAgent
    from ether_host.supervisor.host import AgentHost

log = structlog.get_logger("ether.supervisor")

EXIT_FATAL = 78
TERM_WAIT = 3.0
STDERR_TAIL = 200
PINGS_MISSED_LIMIT = 3
STDERR_AFTER_EXIT = 2.0  # seconds to finish reading a dead process's pipes
EXIT_AFTER_LINK = 2.0  # seconds a task waits, once the link closed, to learn the exit signal


@dataclass
class ProcessLimits:
    """One process's link, its control groups and rlimits, and the signal that ended it (once
    it has exited), for ``Replica.ran_into``."""

    connection: AgentConnection
    limits: Group
    exited: anyio.Event = field(default_factory=anyio.Event)
    signal: int | None = None


@dataclass
class Exit:
    """How one process ended."""

    code: int | None
    signal: int | None
    reason: str
    said_hello: bool
    uptime: float
    fatal: bool = False
    stopped: bool = False  # ended by a stop the host asked for
    wedged: bool = False


def describe_exit(returncode: int | None) -> tuple[int | None, int | None, str]:
    if returncode is None:
        return None, None, "unknown exit"
    if returncode < 0:
        signum = -returncode
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        return None, signum, f"killed by {name}"
    return returncode, None, f"exit code {returncode}"


class Replica:
    """One process slot of an agent, restarted according to its policy."""

    def __init__(self, agent: ManagedAgent, index: int, host: AgentHost) -> None:
        self.agent = agent
        self.host = host
        self.index = index
        # A replica is made only to be run (ManagedAgent.run, a scale up of a running agent):
        # STARTING from the moment it is listed, through its wait for a predecessor still
        # stopping at its index and its spawn, as a process supervisor shows a program it is
        # starting. Being added is no event: its first is its spawn's, STARTING -> STARTING
        # with the pid, as each spawn after a BACKOFF is the one BACKOFF -> STARTING event.
        self.state = State.STARTING
        self.pid = 0
        self.started_at: float | None = None
        self.restarts = 0
        self.last_exit_code: int | None = None
        self.last_signal: int | None = None
        self.reason = ""
        self.connection: AgentConnection | None = None
        self.assigned = 0  # tasks the dispatcher placed here and not yet finished
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        # The current process's link, its control groups and how it ended, for ``ran_into``.
        self._limits_of: ProcessLimits | None = None
        self._stop = anyio.Event()
        self._stop_grace: float | None = None
        self._wedged = anyio.Event()
        self.done = anyio.Event()

    # -- what the dispatcher sees --------------------------------------------------------

    @property
    def ready(self) -> bool:
        connection = self.connection
        return (
            self.state is State.RUNNING
            and connection is not None
            and not connection.closed.is_set()
            and not connection.draining.is_set()
            and not self._stop.is_set()
        )

    @property
    def max_concurrency(self) -> int:
        hello = (self.connection.hello if self.connection else None) or {}
        return max(1, int((hello.get("capabilities") or {}).get("max_concurrency") or 1))

    def mark_wedged(self, why: str) -> None:
        """A task ignored its cancel: restart this process (a failure by policy)."""
        if not self._wedged.is_set():
            log.warning(
                "agent wedged; restarting it", agent=self.agent.name, replica=self.index, why=why
            )
            self.reason = why
            self._wedged.set()

    def link_lost(self, connection: AgentConnection) -> None:
        """A task saw ``connection`` close: take this replica out of the rotation at once.

        The process's exit is noticed a moment later (its reaping, then the state change),
        and a task retried in between must go to a live replica, not this dead one again.
        """
        if self.connection is connection:
            self.connection = None

    def ran_into(self, connection: AgentConnection) -> list[str]:
        """The limits the process behind ``connection`` ran into, in the words of its exit
        reason ("memory limit 64 MiB exceeded", "agents' total memory limit 1 GiB exceeded",
        and once it has exited "CPU time limit 2 s exceeded", "file size limit 1 MiB
        exceeded"), for the error of a task it died under; empty once another process has
        replaced it."""
        if self._limits_of is None or self._limits_of.connection is not connection:
            return []
        return self._limits_of.limits.explain(self._limits_of.signal)

    async def exit_known(self, connection: AgentConnection, within: float) -> None:
        """Wait until the process behind ``connection`` has exited, when it runs under a limit
        that only its exit signal tells (SIGXCPU, SIGXFSZ): then ``ran_into`` names that limit
        too, as the exit reason does. Its stdout reaches EOF, failing its tasks, a moment
        before its exit is reaped, and a process may close stdout and live on: so at most
        ``within`` seconds (and EXIT_AFTER_LINK)."""
        limits_of = self._limits_of
        if (
            limits_of is None
            or limits_of.connection is not connection
            or not limits_of.limits.has_signal_limits
        ):
            return
        with anyio.move_on_after(min(within, EXIT_AFTER_LINK)):
            await limits_of.exited.wait()

    def request_stop(self, grace: float | None = None) -> None:
        self._stop_grace = grace
        self._stop.set()

    # -- lifecycle -----------------------------------------------------------------------

    def _enter(self, state: State, reason: str, **extra: Any) -> None:
        previous, self.state = self.state, state
        self.reason = reason
        self.agent.publish_state(self, previous, reason, **extra)

    async def run(self) -> None:
        """Run processes until stopped, EXITED or FATAL."""
        spec = self.agent.spec
        start_failures = 0
        backoff_step = 0
        recent: deque[float] = deque()
        try:
            while not self._stop.is_set():
                ended = await self._run_process()
                self.last_exit_code, self.last_signal = ended.code, ended.signal
                tail = tuple(list(self.stderr_tail)[-20:])
                if ended.stopped or self._stop.is_set():
                    self._enter(State.STOPPED, "stopped", exit_code=ended.code, signal=ended.signal)
                    return
                if ended.fatal:
                    self._enter(
                        State.FATAL,
                        ended.reason,
                        exit_code=ended.code,
                        signal=ended.signal,
                        stderr_tail=tail,
                    )
                    return
                # An agent is a long-running server: every exit the host did not ask for is a
                # failure, exit 0 too (the adapters exit 0 on an outside SIGTERM).
                if spec.restart == "never":
                    self._enter(
                        State.EXITED,
                        ended.reason,
                        exit_code=ended.code,
                        signal=ended.signal,
                        stderr_tail=tail,
                    )
                    return
                if not ended.said_hello or ended.uptime < spec.stable_after:
                    start_failures += 1
                    if start_failures > spec.start_retries:
                        self._enter(
                            State.FATAL,
                            f"failed to start {start_failures} times; last: {ended.reason}",
                            exit_code=ended.code,
                            signal=ended.signal,
                            stderr_tail=tail,
                        )
                        return
                else:
                    start_failures = 0
                if ended.uptime >= spec.reset_after:
                    backoff_step = 0
                now = time.monotonic()
                recent.append(now)
                while recent and now - recent[0] > spec.restart_period:
                    recent.popleft()
                if len(recent) > spec.max_restarts:
                    self._enter(
                        State.FATAL,
                        f"too many restarts: {len(recent)} in {spec.restart_period:g}s; last: {ended.reason}",
                        exit_code=ended.code,
                        signal=ended.signal,
                        stderr_tail=tail,
                    )
                    return
                backoff_step += 1
                delay = min(spec.backoff_cap, spec.backoff_base * 2 ** (backoff_step - 1))
                delay *= random.uniform(0.8, 1.2)
                self._enter(
                    State.BACKOFF,
                    f"{ended.reason}; restarting in {delay:.1f}s",
                    exit_code=ended.code,
                    signal=ended.signal,
                    stderr_tail=tail,
                )
                with anyio.move_on_after(delay):
                    await self._stop.wait()
                self.restarts += 1
            self._enter(State.STOPPED, "stopped")
        finally:
            self.done.set()

    async def _run_process(self) -> Exit:
        spec = self.agent.spec
        plan = self.agent.plan
        assert plan is not None
        self._wedged = anyio.Event()
        self.stderr_tail.clear()
        registry = self.host.children
        resources = self.host.resources
        # Its own control groups (memory, pids, cpu) and rlimits, joined before it runs.
        limits = resources.for_agent(spec.name, self.index, resources.agent_limits(spec.limits))
        sandbox = await self.agent.sandbox_policy(self.index)
        with registry.spawning() as spawn_id:
            env = agent_environment(
                agent=spec.name,
                spawn_id=spawn_id,
                max_frame=spec.max_frame,
                extra=plan.env | spec.env,
                versions=PROTOCOL_VERSIONS,
            )
            try:
                stdio = await open_agent_process(
                    plan.argv, cwd=plan.cwd, env=env, sandbox=sandbox, prelude=limits.prelude()
                )
            except OSError as error:
                await limits.remove()
                return Exit(
                    None,
                    None,
                    f"cannot start {plan.argv[0]}: {error.strerror}",
                    False,
                    0.0,
                    fatal=True,
                )
            process = stdio.process
            registry.bind(spawn_id, process.pid)
            registry.track_group(process.pid)
            set_cpu_policy(process.pid, spec.cpu_scheduling_policy)
        started = time.monotonic()
        self.pid, self.started_at = process.pid, time.time()
        pgid = process.pid  # recorded now: getpgid() fails once the leader is reaped
        connection = self._connect(stdio.stdin, stdio.stdout)
        limits_of = self._limits_of = ProcessLimits(connection, limits)
        self._enter(State.STARTING, f"spawned {os.path.basename(plan.argv[0])}", pid=process.pid)
        exited = anyio.Event()
        stderr_done = anyio.Event()
        outcome: dict[str, Any] = {
            "stopped": False,
            "wedged": False,
            "hello": False,
            "incompatible": False,
        }
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(connection.run_reader)
                tg.start_soon(self._drain_stderr, stdio.stderr, stderr_done)

                async def wait_exit() -> None:
                    await process.wait()
                    # Before its tasks fail: a task that failed at stdout's EOF may be waiting
                    # for it (``exit_known``).
                    limits_of.signal = describe_exit(process.returncode)[1]
                    limits_of.exited.set()
                    self.link_lost(connection)  # before its tasks fail: a retry goes elsewhere
                    connection.fail_all(
                        LinkClosed(f"agent {spec.name} process {process.pid} exited")
                    )
                    exited.set()

                tg.start_soon(wait_exit)
                hello: dict[str, Any] | None = None  # None also in legacy mode (no hello)
                said_hello = False
                try:
                    # A stop does not wait for the hello (up to start_timeout): it ends the
                    # wait, and the process is stopped as a running one is.
                    with anyio.CancelScope() as before_hello:
                        tg.start_soon(_set_and_cancel, self._stop, outcome, "stopped", before_hello)
                        hello = await connection.handshake(
                            hello_timeout=spec.start_timeout,
                            legacy_after=self._legacy_after(),
                            welcome=lambda hello: self.agent.welcome_frame(hello),
                            upgraded=self._said_hello_late,
                        )
                        said_hello = True
                except HandshakeError as error:
                    self.reason = str(error)
                    outcome["handshake_error"] = str(error)
                    outcome["incompatible"] = isinstance(error, ProtocolMismatch)
                if said_hello:  # not a handshake that failed, nor one a stop ended
                    outcome["hello"] = True
                    # Again: a runtime (Go, Node) may have started threads before the first call.
                    set_cpu_policy(process.pid, spec.cpu_scheduling_policy)
                    self.connection = connection
                    self.agent.accept_hello(hello)
                    self._enter(State.RUNNING, _running_reason(connection, hello), pid=process.pid)
                    tg.start_soon(self._keep_alive, connection)
                    tg.start_soon(self._watch_draining, connection)
                    with anyio.CancelScope() as watch:
                        async with anyio.create_task_group() as waits:
                            for event, key in (
                                (exited, None),
                                (self._stop, "stopped"),
                                (self._wedged, "wedged"),
                            ):
                                waits.start_soon(_set_and_cancel, event, outcome, key, watch)
                self.connection = None
                with anyio.CancelScope(shield=True):
                    if not exited.is_set():
                        if outcome["stopped"] and outcome["hello"]:
                            self._enter(State.STOPPING, "stop requested", pid=process.pid)
                        grace = (
                            self._stop_grace if self._stop_grace is not None else spec.stop_grace
                        )
                        if outcome["wedged"]:
                            # Its other tasks fail as under a process that died (UNAVAILABLE,
                            # retried when idempotent), before the shutdown frame would have the
                            # agent answer them "cancelled: shutting down" as if asked to stop.
                            self.link_lost(connection)
                            connection.fail_all(
                                LinkClosed(
                                    f"agent {spec.name} process {process.pid} restarted: "
                                    f"{self.reason}"
                                )
                            )
                        await self._stop_process(
                            process, connection, grace if not outcome["wedged"] else 0.0
                        )
                    await exited.wait()
                    # Read what the process wrote before it died (its last stderr lines
                    # explain the exit), but never wait long on pipes that a leftover
                    # grandchild may hold open.
                    with anyio.move_on_after(STDERR_AFTER_EXIT):
                        await stderr_done.wait()
                        await connection.closed.wait()
                    kill_group(
                        pgid, signal.SIGKILL
                    )  # leftovers of the group, even if the leader is gone
                    await self._reap_group(pgid)
                    tg.cancel_scope.cancel()
        finally:
            stdio.close()
            self.connection = None
            registry.release(spawn_id)
            registry.untrack_group(pgid)
            with anyio.CancelScope(shield=True):
                await limits.remove()  # what ran into a limit is read before
            self.pid = 0
        uptime = time.monotonic() - started
        code, signum, reason = describe_exit(process.returncode)
        exceeded = limits.explain(signum)  # "memory limit 64 MiB exceeded"
        if exceeded:
            reason = f"{'; '.join(exceeded)} ({reason})"
        if "handshake_error" in outcome:
            reason = f"{outcome['handshake_error']} ({reason})"
        # A protocol version the host does not speak is the same on every start: no retry.
        fatal = code == EXIT_FATAL or connection.fatal is not None or outcome["incompatible"]
        if connection.fatal is not None:
            reason = (
                f"fatal: {connection.fatal.get('code', '')}: {connection.fatal.get('message', '')}"
            )
        elif code == EXIT_FATAL:
            reason = (
                f"exit code 78 (the agent asked never to be restarted); {self._last_error_line()}"
            )
        if outcome["wedged"]:
            reason = f"restarted: {self.reason}"
        return Exit(
            code,
            signum,
            reason,
            outcome["hello"],
            uptime,
            fatal=fatal,
            stopped=outcome["stopped"],
            wedged=outcome["wedged"],
        )

    def _connect(self, stdin: anyio.abc.ByteSendStream, stdout: Any) -> AgentConnection:
        """The link to a new process: Ether's frames, or MCP for an MCP server."""
        spec = self.agent.spec
        if spec.protocol == "mcp":
            return McpConnection(
                stdin,
                stdout,
                agent=spec.name,
                max_frame=spec.max_frame,
                max_concurrency=spec.max_concurrency,
                on_log=lambda frame: self.agent.log_frame(self, frame),
                on_tools_changed=self._tools_changed,
            )
        return AgentConnection(
            stdin,
            stdout,
            agent=spec.name,
            max_frame=spec.max_frame,
            on_call=self.host.handle_call,
            on_log=lambda frame: self.agent.log_frame(self, frame),
        )

    def _tools_changed(self, hello: dict[str, Any]) -> None:
        """The MCP server's tool list changed: the directory takes the new one and WatchEvents
        shows a RUNNING -> RUNNING event saying so."""
        if self.state is not State.RUNNING:
            return
        self.agent.accept_hello(hello)
        names = ", ".join(str(a.get("name")) for a in hello.get("actions") or [])
        self._enter(State.RUNNING, f"tools changed: {names or 'none'}", pid=self.pid)

    def _said_hello_late(self, hello: dict[str, Any]) -> None:
        """The agent said hello after it was taken for a seeds-style one (a slow start): its
        own actions and concurrency from now on; WatchEvents shows a RUNNING -> RUNNING event."""
        if self.state is not State.RUNNING:
            return
        self.agent.accept_hello(hello)
        self._enter(State.RUNNING, "hello received after the seeds' fallback", pid=self.pid)

    def _legacy_after(self) -> float | None:
        """How long a silent child may take before it is run with the seeds' envelope.

        Only a custom command can be a seeds-style child: the runtimes the host
        launches itself (python -m ether_agent, built Go/TypeScript agents)
        always say hello, so they get the whole start timeout.
        """
        spec = self.agent.spec
        if spec.protocol == "legacy":
            return 0.0
        return spec.legacy_after if spec.command and spec.language == "python" else None

    def _last_error_line(self) -> str:
        return next(
            (line for line in reversed(self.stderr_tail) if line.strip()), "no stderr output"
        )

    async def _stop_process(
        self, process: anyio.abc.Process, connection: AgentConnection, grace: float
    ) -> None:
        """Shutdown frame + stdin EOF, then SIGTERM to the group, then SIGKILL."""
        with anyio.move_on_after(max(grace, 0.05)):
            await connection.shutdown(grace, "stop requested")
            await process.wait()
        if process.returncode is None:
            kill_group(process.pid, signal.SIGTERM)
            with anyio.move_on_after(TERM_WAIT):
                await process.wait()
        if process.returncode is None:
            kill_group(process.pid, signal.SIGKILL)

    async def _reap_group(self, pgid: int) -> None:
        """Wait (bounded) until no member of the group is alive; orphans get reaped by the sweeper.

        Usually the agent left nothing behind and its own exit was reaped: then one kill(2)
        says so, and nothing reads /proc. Each scan and sweep below reads every process of the
        machine, so a stop that always did them cost O(processes): RemoveAgent of 500 agents
        took ~16 s, most of it scanning /proc (bench/scale.py)."""
        if group_gone(pgid):
            return
        with anyio.move_on_after(TERM_WAIT):
            while group_members(pgid):
                kill_group(pgid, signal.SIGKILL)
                await anyio.to_thread.run_sync(self.host.children.sweep)
                await anyio.sleep(0.02)
        await anyio.to_thread.run_sync(self.host.children.sweep)

    async def _drain_stderr(self, stream: anyio.abc.ByteReceiveStream, done: anyio.Event) -> None:
        parser = StderrParser()
        splitter = LineSplitter(MAX_STDERR_LINE)

        def emit(line: bytes | Oversized) -> None:
            raw = line.head + b"... [truncated]" if isinstance(line, Oversized) else line
            record = parser.parse(raw)
            self.stderr_tail.append(record.message)
            connection = self.connection
            fields = record.fields
            if connection is not None:  # the task it was written during, when that is known
                fields = task_fields(fields, connection.tasks_in_flight())
            self.agent.log_line(self, "stderr", record.level, record.message, fields)

        try:
            async for chunk in stream:
                for line in splitter.feed(chunk):
                    emit(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        for line in splitter.finish():
            emit(line)
        done.set()

    async def _watch_draining(self, connection: AgentConnection) -> None:
        """The agent began shutting down on its own (it answered a task ``shutting_down``,
        after an outside SIGTERM say): show the replica STOPPING while it drains and exits, and
        restart it if it is still there well after a stop would have killed it, so a replica
        that refuses every task never stays out of the rotation for good."""
        await connection.draining.wait()
        if self._stop.is_set():
            return  # a stop the host asked for: it shows STOPPING and ends the process itself
        if self.state is State.RUNNING:
            self._enter(State.STOPPING, "the agent is shutting down", pid=self.pid)
        await anyio.sleep(self.agent.spec.stop_grace + TERM_WAIT)
        self.mark_wedged("it has refused tasks as shutting down for too long")

    async def _keep_alive(self, connection: AgentConnection) -> None:
        """Ping agents that declared ping; three misses in a row -> restart."""
        missed = 0
        spec = self.agent.spec
        while True:
            await anyio.sleep(spec.ping_interval)
            if await connection.ping(spec.ping_timeout):
                missed = 0
                continue
            missed += 1
            if missed >= PINGS_MISSED_LIMIT:
                self.mark_wedged(f"{missed} pings unanswered")
                return


def _running_reason(connection: AgentConnection, hello: dict[str, Any] | None) -> str:
    if isinstance(connection, McpConnection):
        return f"MCP initialized (protocol {connection.protocol_version})"
    return "hello received" if hello else "running with the seeds' envelope"


async def _set_and_cancel(
    event: anyio.Event, outcome: dict[str, Any], key: str | None, scope: anyio.CancelScope
) -> None:
    await event.wait()
    if key is not None:
        outcome[key] = True
    scope.cancel()


Callback = Callable[..., None]
