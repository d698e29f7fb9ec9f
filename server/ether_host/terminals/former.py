"""The terminals of the host's earlier runs, as the manager answers for them: which a caller
may still read (GetTerminal, ReadScreen), and the NOT_FOUND that says what became of one it
can no longer use (it ended before the restart, or was lost in it).

The records themselves, and why terminals have them, are records.py's; this is what the
manager does with them. Without a state directory nothing is recorded, and no terminal of an
earlier run is known.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable
from typing import Any

import anyio
import structlog

from ether_host.auth import Identity
from ether_host.errors import NotFound
from ether_host.reasons import Reason
from ether_host.terminals.model import ScreenRequest, ScreenView, TerminalInfo, TerminalState
from ether_host.terminals.records import FormerTerminal, TerminalRecords
from ether_host.terminals.rights import READ, require, sees

log = structlog.get_logger("ether.terminals")


class FormerTerminals:
    """The host's terminal records (``records``: None without a state directory) and the
    terminals of its earlier runs read from them at start (``open``)."""

    def __init__(self, records: TerminalRecords | None) -> None:
        self.records = records
        self._former: dict[str, FormerTerminal] = {}
        self._started_at = time.time()  # this run's start, which the errors name

    async def open(self) -> None:
        """Read the earlier runs' terminals (a worker thread); say how many were lost."""
        self._started_at = time.time()
        if self.records is None:
            return
        self._former = await anyio.to_thread.run_sync(self.records.open)
        lost = sum(1 for f in self._former.values() if f.lost)
        if lost:
            log.warning(
                "terminals were running when the host last stopped without closing them; "
                "their ids now answer NOT_FOUND (TERMINAL_LOST_IN_RESTART)",
                lost=lost,
            )

    async def close(self) -> None:
        if self.records is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.records.close)

    def __contains__(self, terminal_id: str) -> bool:
        return terminal_id in self._former

    # -- recording this run's terminals ----------------------------------------------------

    async def created(self, info: TerminalInfo) -> None:
        if self.records is not None:
            await self._record(self.records.created, info)

    async def exited(self, info: TerminalInfo, screen: ScreenView) -> None:
        """Commit a program's exit status and last screen (before the exit is reported)."""
        assert self.records is not None
        info = dataclasses.replace(info, state=TerminalState.EXITED, exit=screen.exit)
        await self._record(self.records.exited, info, screen)

    async def closed(self, info: TerminalInfo, reason: str) -> None:
        if self.records is not None:
            await self._record(self.records.closed, info, reason)

    @staticmethod
    async def _record(write: Callable[..., None], *args: Any) -> None:
        try:
            await anyio.to_thread.run_sync(write, *args)
        except Exception:  # e.g. a full disk: the terminal works on, unrecorded
            log.exception("could not record a terminal under the state directory")

    # -- the terminals of earlier runs ------------------------------------------------------

    def readable(self, identity: Identity, terminal_id: str) -> FormerTerminal | None:
        """A terminal that ended before the host restarted, if the caller may read it."""
        former = self._former.get(terminal_id)
        if former is None or former.lost or not sees(identity, former.info.owner):
            return None
        require(identity, READ, f"terminal {terminal_id}")
        return former

    def not_found(self, identity: Identity, terminal_id: str) -> NotFound:
        """NOT_FOUND for the id of a terminal of an earlier run, saying what became of it."""
        former = self._former[terminal_id]
        if not sees(identity, former.info.owner):
            return NotFound(
                f"no terminal {terminal_id!r} (it may have been closed)",
                reason=Reason.TERMINAL_NOT_FOUND,
                resource=("terminal", terminal_id),
            )
        restarted = _iso(self._started_at)
        metadata = {"host_restarted_at": restarted, "state": former.state}
        if former.lost:
            return NotFound(
                f"terminal {terminal_id} was lost in a host restart: it was still running when "
                f"the host stopped without closing it (killed or crashed) and its program ended "
                f"with the host, before a final screen or exit status could be recorded; the "
                f"host restarted at {restarted}. Terminals do not survive the host: create a "
                f"new one (close terminals before stopping the host to keep their last screen)",
                reason=Reason.TERMINAL_LOST_IN_RESTART,
                metadata=metadata,
                resource=("terminal", terminal_id),
            )
        exit_info = former.info.exit
        how = []
        if former.close_reason:
            how.append(f"closed: {former.close_reason}")
            metadata["close_reason"] = former.close_reason
        if exit_info is not None:
            how.append(exit_info.describe())
            if exit_info.code is not None:
                metadata["exit_code"] = str(exit_info.code)
            else:
                metadata["signal"] = exit_info.signal_name
        return NotFound(
            f"terminal {terminal_id} ended before the host restarted at {restarted} "
            f"({', '.join(how) or 'exited'}): it takes no more input, signals, resizes or "
            f"attaches. GetTerminal and ReadScreen still show its last state and screen; "
            f"create a new terminal to go on",
            reason=Reason.TERMINAL_ENDED_BEFORE_RESTART,
            metadata=metadata,
            resource=("terminal", terminal_id),
        )

    async def screen(
        self, identity: Identity, former: FormerTerminal, request: ScreenRequest
    ) -> ScreenView:
        """Its last screen as recorded (styles and scrollback are not)."""
        assert self.records is not None
        view = await anyio.to_thread.run_sync(self.records.screen, former.info.id)
        if view is None:  # closed without an exit on record (its record could not be written)
            raise self.not_found(identity, former.info.id)
        if request.keep_trailing_spaces:
            return view
        # Recorded with every cell; styles and scrollback are not recorded.
        return dataclasses.replace(view, lines=[line.rstrip(" ") for line in view.lines])


def _iso(when: float) -> str:
    return datetime.datetime.fromtimestamp(when, datetime.UTC).isoformat(timespec="seconds")
