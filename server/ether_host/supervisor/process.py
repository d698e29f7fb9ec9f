"""One process of a replica, from its spawn to its reap: its control groups and sandbox, the
handshake (or the seeds' fallback), RUNNING while it serves, its stop, and how it ended (an
``Exit``, which the replica's restart policy reads).

A part of ``Replica`` (replica.py), apart from the replica's state and restart policy: the loop
there runs one process after another, each with ``_run_process``; the stop and the watches
beside the process are stopping.py's. What it reads of the replica is declared below and set
by ``Replica.__init__``.
"""

from __future__ import annotations

import os
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ether_host.link import (
    PROTOCOL_VERSIONS,
    AgentConnection,
    HandshakeError,
    LinkClosed,
    McpConnection,
    ProtocolMismatch,
)
from ether_host.procs import kill_group, set_cpu_policy
from ether_host.supervisor.environment import agent_environment
from ether_host.supervisor.pipes import open_agent_process
from ether_host.supervisor.records import State
from ether_host.supervisor.stopping import ProcessStopping

if TYPE_CHECKING:
    from ether_host.resources import Group

EXIT_FATAL = 78
STDERR_AFTER_EXIT = 2.0  # seconds to finish reading a dead process's pipes


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


class ReplicaProcess(ProcessStopping):
    """A replica's processes, one run at a time."""

    # The replica's, set by Replica.__init__ (replica.py), besides ProcessStopping's.
    index: int
    started_at: float | None
    reason: str
    connection: AgentConnection | None
    stderr_tail: deque[str]
    _limits_of: ProcessLimits | None
    _stop_grace: float | None
    _wedged: anyio.Event

    if TYPE_CHECKING:  # the replica's own (replica.py)

        def link_lost(self, connection: AgentConnection) -> None: ...

        def _connect(self, stdin: anyio.abc.ByteSendStream, stdout: Any) -> AgentConnection: ...

        async def _drain_stderr(
            self, stream: anyio.abc.ByteReceiveStream, done: anyio.Event
        ) -> None: ...

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
