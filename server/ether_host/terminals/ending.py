"""How a terminal's processes end: its program and everything the program started.

SIGHUP (and SIGCONT, for a stopped job) to the program's process group, its session, its
descendants and any process carrying its ETHER_SPAWN_ID (so a ``setsid``/``nohup`` grandchild
is found too); SIGKILL to what is left after the grace; then the zombies re-parented to the
host (a child subreaper) are reaped, bwrap's init among them when the program ran in a PID
namespace. What this misses, the host's sweeper (procs.ChildRegistry) reaps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

import anyio
import structlog

from ether_host.terminals import processes

log = structlog.get_logger("ether.terminals")

KILL_WAIT = 5.0  # how long SIGKILL's victims get to go before the ending gives up waiting
POLL = 0.02


class ProcessEnding:
    """One terminal's processes, ended and reaped (``run``).

    ``program`` gives the program's pid (the process inside the namespace when contained; read
    at each use, as Terminal.established may learn it while an early close runs), ``wrapper`` the process the host started when that was bwrap (not a member: it dies with
    the namespace), ``between`` bwrap's init (pid -> start time, filled in by established),
    ``reaped`` set once the host
    has reaped the process it started.
    """

    def __init__(
        self,
        terminal_id: str,
        program: Callable[[], int],
        spawn_id: str,
        wrapper: int | None,
        between: dict[int, int],
        reaped: anyio.Event,
    ) -> None:
        self._terminal = terminal_id
        self._program = program
        self._spawn_id = spawn_id
        self._wrapper = wrapper
        self._between = between
        self._reaped = reaped
        self._known: dict[int, int] = {}  # pid -> start time of every process found

    async def run(self, grace: float) -> None:
        members = await anyio.to_thread.run_sync(self._members)
        if not members and self._reaped.is_set():
            await self._reap_between()
            return
        self._signal(members, signal.SIGHUP)
        self._signal(members, signal.SIGCONT)
        deadline = time.monotonic() + grace
        while members or not self._reaped.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            with anyio.move_on_after(min(left, POLL)):
                await self._reaped.wait()
            members = await anyio.to_thread.run_sync(self._members)
        if members:
            log.info(
                "terminal processes ignored SIGHUP; killing", terminal=self._terminal, pids=members
            )
            self._signal(members, signal.SIGKILL)
        with anyio.move_on_after(KILL_WAIT):
            await self._reaped.wait()
            while members := await anyio.to_thread.run_sync(self._members):
                self._signal(members, signal.SIGKILL)
                await anyio.sleep(POLL)
        processes.reap_orphans(self._known)  # zombies of its processes re-parented to the host
        await self._reap_between()

    def _signal(self, pids: list[int], signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._program(), signum)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    def _members(self) -> list[int]:
        """Live processes of this terminal: its group, its session, its descendants, its spawn id."""
        found = processes.tree(self._program(), self._spawn_id, skip=self._wrapper)
        self._known.update(found)
        return sorted(found)

    async def _reap_between(self) -> None:
        """Reap bwrap's init: it dies just after the wrapper (killed with the namespace), and
        is then re-parented to the host, a subreaper, as a zombie. Bounded; the sweeper reaps
        what this misses."""
        if not self._between or not self._reaped.is_set():
            return  # still the wrapper's child (the wrapper reaps it)
        for _ in range(int(KILL_WAIT / POLL)):
            if not processes.reap_orphans(self._between):
                return
            await anyio.sleep(POLL)  # dying: the kernel is killing the namespace
