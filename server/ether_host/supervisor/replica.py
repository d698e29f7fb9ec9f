"""One replica of an agent: spawn, handshake, serve, exit, and restart by policy.

The loop follows supervisor-anchors P1-P11: a death before the process said
hello and stayed up ``stable_after`` is a start failure (``start_retries``
then FATAL); later deaths back off exponentially with jitter, the counter
resets after ``reset_after`` of health, and more than ``max_restarts`` in
``restart_period`` is FATAL. Exit 78 and a ``fatal`` frame are FATAL at once.
Stops run shielded: shutdown frame + stdin EOF, SIGTERM to the group, then
SIGKILL to the group, then reap.

``Replica`` gathers the parts: one process's run, from its spawn to its reap, is process.py's,
the stop and the watches that have a process restarted stopping.py's; the replica's state, what
the dispatcher sees, the restart policy, and the link and stderr that name the replica to its
agent are here.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from ether_host.link import (
    MAX_STDERR_LINE,
    AgentConnection,
    LineSplitter,
    McpConnection,
    Oversized,
    StderrParser,
    task_fields,
)
from ether_host.supervisor.process import ProcessLimits, ReplicaProcess
from ether_host.supervisor.records import State

if TYPE_CHECKING:
    from ether_host.supervisor.agent import ManagedAgent
    from ether_host.supervisor.host import AgentHost

log = structlog.get_logger("ether.supervisor")

STDERR_TAIL = 200
EXIT_AFTER_LINK = 2.0  # seconds a task waits, once the link closed, to learn the exit signal


class Replica(ReplicaProcess):
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

    # -- the link and stderr, which name the replica to its agent ------------------------

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


Callback = Callable[..., None]
