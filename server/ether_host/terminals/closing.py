"""Closing terminals: a caller's close, the expiry of idle and old ones, an owner's when it
goes, every one at shutdown; a terminal's close runs once, to its end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio
import structlog

from ether_host.auth import Identity
from ether_host.background import start_detached
from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.reasons import Reason
from ether_host.terminals.model import TerminalEvent, TerminalInfo
from ether_host.terminals.registry import TerminalRegistry
from ether_host.terminals.rights import CLOSE
from ether_host.terminals.terminal import Terminal

log = structlog.get_logger("ether.terminals")

MAX_GRACE = 60.0
REASONS = ("closed", "idle_timeout", "max_lifetime", "owner_gone", "shutdown")


@dataclass
class _Closing:
    """A close under way, which every caller closing the terminal meanwhile waits for."""

    done: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None


class TerminalClosing(TerminalRegistry):
    """The manager's closes: one at a time for a terminal, each run to its end."""

    async def _expire(self) -> None:
        assert self._changed is not None
        while True:
            changed = self._changed.waiter()
            now = time.monotonic()
            next_due = now + 60.0
            for session in list(self.sessions.values()):
                if session.id in self._closing:
                    continue
                lifetime_due = session.created_clock + session.max_lifetime
                idle_due = session.last_activity_clock + session.idle_timeout
                if now >= lifetime_due:
                    self.spawn(self._close, session, self.settings.close_grace, "max_lifetime")
                elif now >= idle_due:
                    self.spawn(self._close, session, self.settings.close_grace, "idle_timeout")
                else:
                    next_due = min(next_due, lifetime_due, idle_due)
            with anyio.move_on_after(max(0.01, next_due - time.monotonic())):
                await changed.wait()

    async def close_all(self, reason: str = "shutdown") -> None:
        """Close every terminal (host shutdown); new ones are refused from now on."""
        self._stopping = True
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for session in list(self.sessions.values()):
                    tg.start_soon(self._close, session, self.settings.close_grace, reason)
        self.events.close()

    async def close_owner(self, owner: str, reason: str = "owner_gone") -> int:
        """Close every terminal of ``owner`` (an agent that stopped); returns how many."""
        mine = [s for s in self.sessions.values() if s.owner == owner]
        async with anyio.create_task_group() as tg:
            for session in mine:
                tg.start_soon(self._close, session, self.settings.close_grace, reason)
        return len(mine)

    async def close(
        self, identity: Identity, terminal_id: str, grace: float | None = None
    ) -> TerminalInfo:
        session = self.find(identity, terminal_id, CLOSE)
        if grace is not None and not 0 <= grace <= MAX_GRACE:
            raise InvalidArgument(
                f"grace {grace:g}s is out of range 0 to {MAX_GRACE:g}s",
                reason=Reason.INVALID_GRACE,
                violations=[FieldViolation("grace", "0 to 60 seconds")],
            )
        return await self._close(
            session, self.settings.close_grace if grace is None else grace, "closed"
        )

    async def _close(self, session: Terminal, grace: float, reason: str) -> TerminalInfo:
        """Close ``session`` (the `closed` event gives ``reason``); its info once closed.

        The close runs in the manager's task group, to its end whoever waits for it: a
        CloseTerminal whose client goes during the grace (its deadline passes, it cancels)
        leaves it running -- the program still gets its SIGKILL, the terminal is still
        forgotten. A close of the terminal asked for meanwhile waits for this one."""
        closing = self._closing.get(session.id)
        if closing is None:
            closing = self._closing[session.id] = _Closing()
            if self._tg is None:  # not running (the host's start or end): nothing to outlive
                await self._end(session, grace, reason, closing)
            else:
                start_detached(self._tg, self._end, session, grace, reason, closing)
        await closing.done.wait()
        if closing.error is not None:
            raise closing.error
        return session.info()

    async def _end(self, session: Terminal, grace: float, reason: str, closing: _Closing) -> None:
        try:
            await self._end_session(session, grace, reason)
        except Exception as error:  # for the callers waiting; the task group goes on
            closing.error = error
        finally:
            self._closing.pop(session.id, None)
            closing.done.set()

    async def _end_session(self, session: Terminal, grace: float, reason: str) -> None:
        await session.terminate(grace)
        if session.recorder is not None:
            await anyio.to_thread.run_sync(session.recorder.remove)
        await self._wipe_scratch(session.id)
        if not session.closed:
            session.closed = True
            self.sessions.pop(session.id, None)
            self.closed_input_bytes += session.input_bytes
            self.closed_output_bytes += session.buffer.end
            self._announced.discard(session.id)
            self._early_exits.discard(session.id)
            info = session.info()
            await self._former.closed(info, reason)
            self.events.append(TerminalEvent("closed", info, reason))
            log.info(
                "terminal closed",
                terminal=session.id,
                reason=reason,
                owner=session.owner,
                status=session.exit.describe() if session.exit else "",
            )
