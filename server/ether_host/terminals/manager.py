"""The terminal use cases: create, find, operate, close; limits, ownership and rights.

Every operation names the caller's Identity and checks it as rights.py says: a terminal is
visible to its owner and to admins only, and each operation needs its own right. The terminals
of the host's earlier runs and the records kept for them are former.py's. ``TerminalManager``
gathers the parts: creating a terminal is creating.py's, closing one closing.py's, the state
they share and the lookups registry.py's; running, reading and operating terminals are here.
"""

from __future__ import annotations

import functools
import resource
import shutil
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from ether_host.auth import Identity
from ether_host.errors import FailedPrecondition, FieldViolation, InvalidArgument, PermissionDenied
from ether_host.paging import Page, paginate
from ether_host.reasons import Reason
from ether_host.telemetry import optional_span
from ether_host.terminals import keys, processes, waiting
from ether_host.terminals.attach import Attachment
from ether_host.terminals.buffer import Notifier
from ether_host.terminals.closing import TerminalClosing
from ether_host.terminals.creating import TerminalCreation
from ether_host.terminals.model import (
    InputAccepted,
    ScreenRequest,
    ScreenView,
    TerminalInfo,
    TerminalState,
)
from ether_host.terminals.recording import RecordingInfo
from ether_host.terminals.records import FormerTerminal
from ether_host.terminals.requests import parse_signal, size
from ether_host.terminals.rights import ATTACH, READ, RESIZE, SIGNAL, WRITE, require
from ether_host.terminals.terminal import Terminal

log = structlog.get_logger("ether.terminals")

DEFAULT_WAIT = 30.0  # seconds a wait without a timeout lasts
DEADLINE_MARGIN = 0.1  # a wait answers this long before its caller's deadline
MAX_RECORDING_READ = 1024 * 1024  # GetRecording's largest piece (well under gRPC's 4 MiB)


class TerminalManager(TerminalCreation, TerminalClosing):
    """Owns every terminal of the host."""

    # -- running -------------------------------------------------------------------------

    def run_in_background(self, job: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``job`` in the manager's task group once it runs (wiring, e.g. the owner watcher)."""
        self._background.append(job)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Expire idle and old terminals until cancelled; owned by the host's task group."""
        self._warn_of_descriptor_limit()
        self._changed = Notifier()
        if self._recordings is not None:  # casts of an earlier run's terminals, none kept
            await anyio.to_thread.run_sync(shutil.rmtree, self._recordings, True)
        await self._former.open()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for job in self._background:
                    tg.start_soon(job)
                task_status.started()
                try:
                    await self._expire()
                finally:
                    self._tg = None
        finally:
            await self._former.close()

    def _warn_of_descriptor_limit(self) -> None:
        limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = self.settings.max_terminals * processes.DESCRIPTORS_PER_TERMINAL
        if wanted > limit // 2:  # the other half for connections, agents and the host itself
            log.warning(
                "terminals.max_terminals needs more file descriptors than the host may open; "
                "raise `ulimit -n`",
                max_terminals=self.settings.max_terminals,
                descriptors_wanted=wanted,
                limit=limit,
            )

    # -- use cases -----------------------------------------------------------------------

    def _former_readable(self, identity: Identity, terminal_id: str) -> FormerTerminal | None:
        """A terminal of the host's earlier runs the caller may read (not a running one)."""
        if terminal_id in self.sessions:
            return None
        return self._former.readable(identity, terminal_id)

    def get(self, identity: Identity, terminal_id: str) -> TerminalInfo:
        former = self._former_readable(identity, terminal_id)
        if former is not None:
            return former.info
        return self.find(identity, terminal_id, READ).info()

    def list(
        self, identity: Identity, owner: str = "", state: TerminalState | None = None
    ) -> list[TerminalInfo]:
        """The terminals the caller may see whose start has ended (their `created` event out).

        One still starting (its program runs, its record is being committed) is left out: a
        watch opened meanwhile (WatchTerminals' include_existing) would send it as it was
        then and skip its own `created`, which the start sends once its record is committed,
        describing it as CreateTerminal answers."""
        wanted = self.owner_filter(identity, owner)
        return [
            s.info()
            for s in self.sessions.values()
            if s.id in self._announced
            and (wanted is None or s.owner == wanted)
            and (state is None or s.state is state)
        ]

    def list_page(
        self,
        identity: Identity,
        page_size: int,
        page_token: str,
        owner: str = "",
        state: TerminalState | None = None,
        *,
        elsewhere: Sequence[TerminalInfo] | None = None,
    ) -> Page[TerminalInfo]:
        """One page of :meth:`list`, oldest terminal first; with ``elsewhere`` (the terminals
        the cluster's other hosts listed for the caller, same filters), of the cluster's."""
        scope = f"terminals/{owner}/{state.name if state else ''}"
        mine = self.list(identity, owner, state)
        return paginate(
            mine if elsewhere is None else [*mine, *elsewhere],
            page_size,
            page_token,
            scope if elsewhere is None else f"cluster/{scope}",
            key=lambda i: (i.created_at, i.id),
        )

    def set_recording(self, identity: Identity, terminal_id: str, record: bool) -> RecordingInfo:
        """Start a new recording of the terminal's output, or stop the current one."""
        session = self.find(identity, terminal_id, WRITE)
        if record:
            return session.start_recording(functools.partial(self._new_recorder, session)).info()
        if session.recorder is None:
            return RecordingInfo(False, 0, self.settings.recording_limit, 0.0, "")
        session.recorder.stop()
        return session.recorder.info()

    async def get_recording(
        self, identity: Identity, terminal_id: str, offset: int, max_bytes: int
    ) -> tuple[bytes, RecordingInfo]:
        """Up to ``max_bytes`` (0: the most) of the terminal's cast from ``offset``, and its state."""
        session = self.find(identity, terminal_id, READ)
        recorder = session.recorder
        if recorder is None:
            raise FailedPrecondition(
                f"terminal {terminal_id} has not been recorded: create it with record set, or "
                f"start a recording with SetRecording, then download it",
                reason=Reason.NO_RECORDING,
                resource=("terminal", terminal_id),
            )
        if offset < 0 or not 0 <= max_bytes <= MAX_RECORDING_READ:
            raise InvalidArgument(
                f"offset must be 0 or more and max_bytes 0 to {MAX_RECORDING_READ}",
                reason=Reason.INVALID_FIELD,
                violations=[
                    FieldViolation("offset" if offset < 0 else "max_bytes", "out of range")
                ],
            )
        info = recorder.info()  # before the read: the data reaches at least info.size
        data = await anyio.to_thread.run_sync(
            recorder.read, offset, max_bytes or MAX_RECORDING_READ
        )
        return data, info

    def write(self, identity: Identity, terminal_id: str, spec: keys.InputSpec) -> InputAccepted:
        session = self.find(identity, terminal_id, WRITE)
        return session.write(self._encode(session, spec))

    def _encode(self, session: Terminal, spec: keys.InputSpec) -> bytes:
        return keys.encode(
            spec,
            app_cursor=session.app_cursor,
            bracketed_paste=session.bracketed_paste,
            max_bytes=self.settings.input_queue,
            subject=f"terminal:{session.id}",
        )

    async def read_screen(
        self, identity: Identity, terminal_id: str, request: ScreenRequest
    ) -> ScreenView:
        if request.scrollback_limit < 0:
            raise InvalidArgument(
                "scrollback_limit is negative",
                reason=Reason.INVALID_SCROLLBACK_LIMIT,
                violations=[FieldViolation("scrollback_limit", "0 or more")],
            )
        former = self._former_readable(identity, terminal_id)
        if former is not None:
            return await self._former.screen(identity, former, request)
        return await self.find(identity, terminal_id, READ).screen(request)

    def resize(self, identity: Identity, terminal_id: str, rows: int, cols: int) -> tuple[int, int]:
        session = self.find(identity, terminal_id, RESIZE)
        return session.resize(
            size(rows, 0, "rows", keep=session.rows), size(cols, 0, "cols", keep=session.cols)
        )

    def send_signal(
        self, identity: Identity, terminal_id: str, name: str, foreground: bool
    ) -> tuple[int, int]:
        session = self.find(identity, terminal_id, SIGNAL)
        signum = parse_signal(name)
        return signum, session.send_signal(signum, foreground)

    async def wait_for(
        self,
        identity: Identity,
        terminal_id: str,
        condition: waiting.WaitCondition | None,
        within: float | None,
        request: ScreenRequest,
        *,
        time_left: float | None = None,
    ) -> waiting.WaitResult:
        """Wait ``within`` seconds (DEFAULT_WAIT when None) for ``condition``, answering
        DEADLINE_MARGIN before the caller's deadline when it has one (``time_left``, seconds)."""
        session = self.find(identity, terminal_id, READ)
        condition = waiting.validate(condition)
        if within is not None and within < 0:
            raise InvalidArgument(
                "timeout is negative",
                reason=Reason.INVALID_TIMEOUT,
                violations=[FieldViolation("timeout", "0 or more")],
            )
        wait = DEFAULT_WAIT if within is None else within
        if time_left is not None:
            wait = min(wait, max(0.0, time_left - DEADLINE_MARGIN))
        kind = type(condition).__name__.removesuffix("Wait").lower()
        attributes = {"ether.terminal_id": terminal_id, "ether.wait.condition": kind}
        with optional_span(self.tracing, "ether.terminal.wait_for", attributes) as span:
            result = await waiting.wait_for(session, condition, wait, request)
            if span is not None:
                span.set_attribute("ether.wait.waited_s", result.waited)
            return result

    def attach(
        self, identity: Identity, terminal_id: str, from_offset: int | None, read_only: bool
    ) -> Attachment:
        session = self.find(identity, terminal_id, ATTACH)
        read_only = read_only or not identity.may(WRITE)
        return Attachment(session, from_offset, read_only, self.settings.attach_lag)

    def attach_input(
        self, identity: Identity, attachment: Attachment, spec: keys.InputSpec
    ) -> None:
        self._attach_may(identity, attachment, WRITE, "input")
        attachment.session.write(self._encode(attachment.session, spec))

    def attach_resize(
        self, identity: Identity, attachment: Attachment, rows: int, cols: int
    ) -> None:
        self._attach_may(identity, attachment, RESIZE, "resize")
        session = attachment.session
        if session.exit is not None:
            # A viewer sends its window's size as it attaches, perhaps after the program ended:
            # that changes nothing, and the stream still ends with the exit (ResizeTerminal
            # on an ended program is FAILED_PRECONDITION).
            return
        session.resize(
            size(rows, 0, "rows", keep=session.rows), size(cols, 0, "cols", keep=session.cols)
        )

    def attach_signal(
        self, identity: Identity, attachment: Attachment, name: str, foreground: bool
    ) -> None:
        self._attach_may(identity, attachment, SIGNAL, "signal")
        attachment.session.send_signal(parse_signal(name), foreground)

    @staticmethod
    def _attach_may(identity: Identity, attachment: Attachment, right: str, what: str) -> None:
        if attachment.read_only:
            raise PermissionDenied(
                f"this attach to terminal {attachment.session.id} is read-only: no {what}",
                reason=Reason.READ_ONLY_ATTACH,
                resource=("terminal", attachment.session.id),
            )
        require(identity, right, f"terminal {attachment.session.id}")
