"""The terminals of the host and what is under way for them: the state the manager's parts
share (creating.py, closing.py, manager.py), and the lookups every use case starts with.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from ether_host.auth import Identity
from ether_host.background import start_detached
from ether_host.bus import History
from ether_host.errors import (
    FieldViolation,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from ether_host.procs import ChildRegistry
from ether_host.reasons import Reason
from ether_host.resources import Resources
from ether_host.sandbox import Grant, SandboxSettings
from ether_host.telemetry import Tracing
from ether_host.terminals import admission
from ether_host.terminals.buffer import Notifier
from ether_host.terminals.former import FormerTerminals
from ether_host.terminals.model import TerminalEvent
from ether_host.terminals.placement import TerminalPlacement
from ether_host.terminals.records import TerminalRecords
from ether_host.terminals.rights import ADMIN, READ, require, sees
from ether_host.terminals.settings import TerminalSettings
from ether_host.terminals.terminal import Terminal

if TYPE_CHECKING:
    from ether_host.terminals.closing import _Closing

EVENT_HISTORY = 1000


class TerminalRegistry:
    """Every terminal of the host, the creates and closes under way, and the task group they
    run in; finding a terminal for a caller."""

    def __init__(
        self, settings: TerminalSettings, children: ChildRegistry, state_dir: Path | None = None
    ) -> None:
        self.settings = settings
        self.children = children
        # Memory, processes, files and CPU of each terminal (the host's: wired by main).
        self.resources = Resources.unlimited()
        self.tracing: Tracing | None = None  # WaitFor's spans, when main turns tracing on
        # Which host owns a terminal (its id names it in a cluster); main gives it the cluster.
        self.placement = TerminalPlacement()
        self._state_dir = state_dir
        # Scratch directories removed when their terminal closes (all but keep_scratch ones).
        self._scratch_to_wipe: dict[str, str] = {}
        # What a new terminal of an owner may see (None: no sandbox). Clients' per the
        # [terminals] table; main wires agents' own (terminals/hostcalls.py).
        self.sandbox_for: Callable[[str], tuple[Grant, SandboxSettings] | None] = lambda owner: (
            admission.client_sandbox(self.settings)
        )
        # Whether a terminal's owner has gone (an agent that stopped, exited for good or went
        # FATAL; main wires it, terminals/hostcalls.py): a create under way when its owner
        # went is refused in the step that would register it (creating.py).
        self.owner_gone: Callable[[str], bool] = lambda owner: False
        # Each terminal's record under the state directory, and the terminals of the host's
        # earlier runs read from there at start (former.py): ids that outlive their PTYs.
        self._former = FormerTerminals(
            TerminalRecords(state_dir / "terminals" / "terminals.sqlite3")
            if state_dir is not None
            else None
        )
        # Terminals' asciicasts (recording.py); a terminal's goes when it closes.
        self._recordings = state_dir / "terminals" / "recordings" if state_dir is not None else None
        self.sessions: dict[str, Terminal] = {}
        # Bytes in and out of the terminals closed since the host started (the open ones keep
        # their own): the metrics scrape's totals do not drop when a terminal closes.
        self.closed_input_bytes = 0
        self.closed_output_bytes = 0
        self.events: History[TerminalEvent] = History(EVENT_HISTORY)
        self._request_ids: dict[tuple[str, str], tuple[str, float]] = {}
        # Creates under way: the owner of each new terminal by id (it counts against the limits
        # from its check on, though it joins `sessions` only after an await), and the request
        # ids they hold (a create repeating one waits for the first's answer).
        self._starting: dict[str, str] = {}
        self._creating: dict[tuple[str, str], anyio.Event] = {}
        self._closing: dict[str, _Closing] = {}  # closes under way, by terminal id
        self._stopping = False
        self._tg: TaskGroup | None = None
        self._changed: Notifier | None = None
        self._background: list[Callable[[], Coroutine[Any, Any, None]]] = []
        # Terminals whose "created" event went out (only they are listed), and exits seen
        # before it did.
        self._announced: set[str] = set()
        self._early_exits: set[str] = set()

    def spawn(self, function: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        if self._tg is None:
            raise Unavailable(
                "the terminal service is not running", reason=Reason.TERMINALS_NOT_RUNNING
            )
        start_detached(self._tg, function, *args)  # never in the context of a request

    async def _wipe_scratch(self, terminal_id: str) -> None:
        """Remove the scratch directory the terminal's sandbox made, if it is to be wiped."""
        scratch = self._scratch_to_wipe.pop(terminal_id, None)
        if scratch is not None:
            await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, scratch, True))

    # -- lookups and rights --------------------------------------------------------------

    def find(self, identity: Identity, terminal_id: str, right: str) -> Terminal:
        """The terminal, if the caller may see it and holds ``right``."""
        if not terminal_id:
            raise InvalidArgument(
                "terminal_id is required",
                reason=Reason.MISSING_TERMINAL_ID,
                violations=[FieldViolation("terminal_id", "required")],
            )
        session = self.sessions.get(terminal_id)
        if session is None and terminal_id in self._former:
            raise self._former.not_found(identity, terminal_id)
        if session is None or not sees(identity, session.owner):
            raise NotFound(
                f"no terminal {terminal_id!r} (it may have been closed)",
                reason=Reason.TERMINAL_NOT_FOUND,
                resource=("terminal", terminal_id),
            )
        require(identity, right, f"terminal {terminal_id}")
        return session

    def owner_filter(self, identity: Identity, owner: str) -> str | None:
        """The owner to filter on (None: every owner); others' terminals need the admin right."""
        require(identity, READ, "terminals")
        if not owner:
            return identity.name
        if owner != identity.name and not identity.may(ADMIN):
            raise PermissionDenied(
                f"{identity.name} may only see its own terminals (the {ADMIN} right is needed "
                f"for owner {owner!r})",
                reason=Reason.MISSING_RIGHT,
                metadata={"right": ADMIN},
            )
        return None if owner == "*" else owner
