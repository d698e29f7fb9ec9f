"""The terminal use cases: create, find, operate, close; limits, ownership and rights.

Every operation names the caller's Identity and checks it as rights.py says: a terminal is
visible to its owner and to admins only, and each operation needs its own right. The terminals
of the host's earlier runs and the records kept for them are former.py's.
"""

from __future__ import annotations

import functools
import resource
import secrets
import shutil
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from ether_host.auth import Identity
from ether_host.background import run_detached, run_to_the_end, start_detached
from ether_host.bus import History
from ether_host.errors import (
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from ether_host.paging import Page, paginate
from ether_host.procs import ChildRegistry
from ether_host.reasons import Reason
from ether_host.resources import Resources
from ether_host.sandbox import Grant, SandboxPolicy, SandboxSettings
from ether_host.telemetry import Tracing, optional_span
from ether_host.terminals import admission, keys, processes, waiting
from ether_host.terminals.attach import Attachment
from ether_host.terminals.buffer import Notifier
from ether_host.terminals.former import FormerTerminals
from ether_host.terminals.model import (
    InputAccepted,
    ScreenRequest,
    ScreenView,
    TerminalEvent,
    TerminalInfo,
    TerminalState,
)
from ether_host.terminals.placement import TerminalPlacement, new_terminal_id
from ether_host.terminals.recording import Recorder, RecordingInfo
from ether_host.terminals.records import FormerTerminal, TerminalRecords
from ether_host.terminals.requests import CreateSpec, LaunchPlan, parse_signal, plan_launch, size
from ether_host.terminals.rights import (
    ADMIN,
    ATTACH,
    CLOSE,
    CREATE,
    READ,
    RESIZE,
    SIGNAL,
    WRITE,
    require,
    sees,
)
from ether_host.terminals.settings import TerminalSettings
from ether_host.terminals.terminal import Terminal

log = structlog.get_logger("ether.terminals")

EVENT_HISTORY = 1000
REQUEST_ID_TTL = 600.0
MAX_GRACE = 60.0
DEFAULT_WAIT = 30.0  # seconds a wait without a timeout lasts
DEADLINE_MARGIN = 0.1  # a wait answers this long before its caller's deadline
REASONS = ("closed", "idle_timeout", "max_lifetime", "owner_gone", "shutdown")
MAX_RECORDING_READ = 1024 * 1024  # GetRecording's largest piece (well under gRPC's 4 MiB)


@dataclass
class _Closing:
    """A close under way, which every caller closing the terminal meanwhile waits for."""

    done: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None


class TerminalManager:
    """Owns every terminal of the host."""

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

    def spawn(self, function: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        if self._tg is None:
            raise Unavailable(
                "the terminal service is not running", reason=Reason.TERMINALS_NOT_RUNNING
            )
        start_detached(self._tg, function, *args)  # never in the context of a request

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

    # -- use cases -----------------------------------------------------------------------

    async def create(self, identity: Identity, spec: CreateSpec) -> TerminalInfo:
        self._refuse_if_stopping()
        require(identity, CREATE, "a new terminal")
        owner = spec.owner or identity.name
        if owner != identity.name and not identity.may(ADMIN):
            raise PermissionDenied(
                f"{identity.name} may not create terminals for {owner!r} (needs {ADMIN})",
                reason=Reason.MISSING_RIGHT,
                metadata={"right": ADMIN},
            )
        key = (owner, spec.request_id) if spec.request_id else None
        if key is not None:
            earlier = await self._created_for(key)
            if earlier is not None:
                return earlier.info()
            self._refuse_if_stopping()  # it may have waited for a create under way
        launch = plan_launch(self.settings, spec)
        admission.check_limits(self.settings, self._owners(), owner)
        terminal_id = new_terminal_id(secrets.token_hex(8), self.placement.host_name)
        # From its check to its answer the terminal holds its place under the limits and its
        # request_id: making its sandbox (a worker thread) and starting its program take
        # awaits, and creates checked meanwhile must count it, or wait for it.
        self._starting[terminal_id] = owner
        if key is not None:
            self._creating[key] = anyio.Event()
        # The start runs to its end in the manager's task group, whoever waits for it: a
        # CreateTerminal whose client goes while its program starts (it cancels, its deadline
        # passes) would otherwise leave the terminal running unannounced, its request_id not
        # remembered (a retry made a second one).
        return await run_to_the_end(self._tg, self._start, terminal_id, owner, spec, launch, key)

    def _refuse_if_stopping(self) -> None:
        if self._stopping:
            raise Unavailable("the host is stopping; no new terminals", reason=Reason.HOST_STOPPING)

    def _owners(self) -> list[str]:
        """The owner of every terminal open or being created (admission.check_limits)."""
        starting = [o for t, o in self._starting.items() if t not in self.sessions]
        return [*(s.owner for s in self.sessions.values()), *starting]

    async def _created_for(self, key: tuple[str, str]) -> Terminal | None:
        """The open terminal a create with this (owner, request_id) made within REQUEST_ID_TTL;
        one under way is waited for (its repeat gets its terminal, not a second one)."""
        while (under_way := self._creating.get(key)) is not None:
            await under_way.wait()
        now = time.monotonic()
        self._request_ids = {k: v for k, v in self._request_ids.items() if v[1] > now}
        earlier = self._request_ids.get(key)
        return self.sessions.get(earlier[0]) if earlier is not None else None

    async def _start(
        self,
        terminal_id: str,
        owner: str,
        spec: CreateSpec,
        launch: LaunchPlan,
        key: tuple[str, str] | None,
    ) -> TerminalInfo:
        """``_launch``, then the place and the request_id ``create`` held for it let go. They
        are taken there, in the step of its checks, not here: this task runs a step later, and
        a create checked in between must count this one, or wait for it."""
        try:
            return await self._launch(terminal_id, owner, spec, launch, key)
        finally:
            del self._starting[terminal_id]
            if key is not None:
                self._creating.pop(key).set()

    async def _launch(
        self,
        terminal_id: str,
        owner: str,
        spec: CreateSpec,
        launch: LaunchPlan,
        key: tuple[str, str] | None,
    ) -> TerminalInfo:
        """Start the terminal ``create`` admitted; its info once recorded and announced."""
        sandbox = await self._sandbox(owner, terminal_id, spec.cwd, launch.cwd)
        if self._stopping:  # the host's closing began meanwhile: it closes only what it found
            await self._wipe_scratch(terminal_id)
            self._refuse_if_stopping()
        session = Terminal(
            terminal_id=terminal_id,
            name=spec.name,
            owner=owner,
            program=launch.program,
            env=launch.env,
            cwd=launch.cwd,
            rows=launch.rows,
            cols=launch.cols,
            term=launch.term,
            scrollback_lines=launch.scrollback_lines,
            idle_timeout=launch.idle_timeout,
            max_lifetime=launch.max_lifetime,
            settings=self.settings,
            children=self.children,
            on_exit=self._exited,
            spawn_task=self.spawn,
            record_exit=self._record_exit if self._former.records is not None else None,
            sandbox=sandbox,
        )
        session.limits = self.resources.for_terminal(session.id)
        if spec.record:  # before it starts: the cast has the program's first byte
            session.recorder = self._new_recorder(session)
        # The PTY's readers and the exit watcher outlive this call: not in its context.
        run_detached(session.start)
        self.sessions[session.id] = session
        await session.established()
        if key is not None:
            self._request_ids[key] = (session.id, time.monotonic() + REQUEST_ID_TTL)
        info = session.info()
        await self._former.created(info)  # before the id is given out: it must outlive the host
        self.events.append(TerminalEvent("created", info))
        self._announced.add(session.id)
        if session.id in self._early_exits:  # it exited while we waited for it to start
            self._early_exits.discard(session.id)
            self._exited(session)
        if self._changed is not None:
            self._changed.notify()
        return info

    async def _sandbox(
        self, owner: str, terminal_id: str, asked_cwd: str, cwd: str
    ) -> SandboxPolicy | None:
        """The sandbox of a new terminal of ``owner`` (``sandbox_for``), if it gets one."""
        found = self.sandbox_for(owner)
        if found is None or self._state_dir is None:
            return None
        policy, wiped = await admission.sandbox_policy(
            found, self._state_dir, terminal_id, asked_cwd, cwd
        )
        if wiped is not None:
            self._scratch_to_wipe[terminal_id] = wiped
        return policy

    async def _wipe_scratch(self, terminal_id: str) -> None:
        scratch = self._scratch_to_wipe.pop(terminal_id, None)
        if scratch is not None:
            await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, scratch, True))

    def _exited(self, session: Terminal) -> None:
        if session.id not in self._announced:
            # Watchers must see "created" before "exited": hold the exit until create() is done.
            self._early_exits.add(session.id)
            return
        if not session.closed:
            self.events.append(TerminalEvent("exited", session.info()))

    async def _record_exit(self, session: Terminal, screen: ScreenView) -> None:
        """Commit a program's exit status and last screen (before the exit is reported)."""
        await self._former.exited(session.info(), screen)

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

    def _new_recorder(self, session: Terminal) -> Recorder:
        if self._recordings is None:
            raise FailedPrecondition(
                "this host keeps no state directory, where recordings are written",
                reason=Reason.NO_RECORDING,
            )
        try:
            return Recorder(
                self._recordings / f"{session.id}.cast",
                self.settings.recording_limit,
                rows=session.rows,
                cols=session.cols,
                term=session.term,
                title=session.name,
                terminal_id=session.id,
            )
        except OSError as error:
            raise Unavailable(
                f"could not create the recording of terminal {session.id} under the host's "
                f"state directory: {error.strerror}",
                reason=Reason.STATE_NOT_WRITTEN,
                retry_after=5.0,
            ) from None

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
