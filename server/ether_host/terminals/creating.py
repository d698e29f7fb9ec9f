"""Creating a terminal: its admission (the limits count the creates under way), its sandbox,
its request_id remembered, its start run to the end, and its `created` event before its exit.
"""

from __future__ import annotations

import secrets
import time

import anyio
import structlog

from ether_host.auth import Identity
from ether_host.background import run_detached, run_to_the_end
from ether_host.errors import FailedPrecondition, PermissionDenied, Unavailable
from ether_host.reasons import Reason
from ether_host.sandbox import SandboxPolicy
from ether_host.terminals import admission
from ether_host.terminals.model import ScreenView, TerminalEvent, TerminalInfo
from ether_host.terminals.placement import new_terminal_id
from ether_host.terminals.recording import Recorder
from ether_host.terminals.registry import TerminalRegistry
from ether_host.terminals.requests import CreateSpec, LaunchPlan, plan_launch
from ether_host.terminals.rights import ADMIN, CREATE, require
from ether_host.terminals.terminal import Terminal

REQUEST_ID_TTL = 600.0

log = structlog.get_logger("ether.terminals")


class TerminalCreation(TerminalRegistry):
    """The manager's create (and the recorders a terminal's cast is written by)."""

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
        # Only an owner present now can go during the start (an admin's terminal for an agent
        # not running is its own business: no watcher closes it, and none refuses it).
        watched = not self.owner_gone(owner)
        return await run_to_the_end(
            self._tg, self._start, terminal_id, owner, spec, launch, key, watched
        )

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
        watched: bool,
    ) -> TerminalInfo:
        """``_launch``, then the place and the request_id ``create`` held for it let go. They
        are taken there, in the step of its checks, not here: this task runs a step later, and
        a create checked in between must count this one, or wait for it."""
        try:
            return await self._launch(terminal_id, owner, spec, launch, key, watched)
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
        watched: bool,
    ) -> TerminalInfo:
        """Start the terminal ``create`` admitted; its info once recorded and announced."""
        sandbox = await self._sandbox(owner, terminal_id, spec.cwd, launch.cwd)
        if self._stopping:  # the host's closing began meanwhile: it closes only what it found
            await self._wipe_scratch(terminal_id)
            self._refuse_if_stopping()
        # Its owner went meanwhile (an agent's term.create runs on when the agent goes): the
        # owner watcher closed what it found then, which was not this one yet. Checked in the
        # step that registers the terminal, so an owner that goes later finds it registered.
        if watched and self.owner_gone(owner):
            await self._wipe_scratch(terminal_id)
            log.info("terminal not started", terminal=terminal_id, owner=owner, reason="owner_gone")
            raise FailedPrecondition(
                f"{owner} went away while its terminal was being created; none was started",
                reason=Reason.AGENT_NOT_RUNNING,
            )
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
