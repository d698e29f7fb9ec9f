"""How a replica's process is stopped, and the watches that have it restarted: the three-phase
stop (shutdown frame + stdin EOF, SIGTERM to the group, SIGKILL) and the reap of what the
group left; pings unanswered, and an agent shutting down on its own for too long.

A part of ``Replica`` (replica.py), apart from the process's run (process.py), which stops the
process with these and runs the watches beside it. What it reads of the replica is declared
below and set by ``Replica.__init__``.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

import anyio

from ether_host.link import AgentConnection
from ether_host.procs import group_gone, group_members, kill_group
from ether_host.supervisor.records import State

if TYPE_CHECKING:
    from ether_host.supervisor.agent import ManagedAgent
    from ether_host.supervisor.host import AgentHost

TERM_WAIT = 3.0
PINGS_MISSED_LIMIT = 3


class ProcessStopping:
    """A replica's stops and the watches that end its process."""

    # The replica's, set by Replica.__init__ (replica.py).
    agent: ManagedAgent
    host: AgentHost
    state: State
    pid: int
    _stop: anyio.Event

    if TYPE_CHECKING:  # the replica's own (replica.py)

        def _enter(self, state: State, reason: str, **extra: Any) -> None: ...

        def mark_wedged(self, why: str) -> None: ...

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
