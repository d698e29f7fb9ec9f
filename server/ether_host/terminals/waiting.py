"""WaitFor: block until a regex matches the screen or the output, the program exits, or it goes quiet.

A wait never polls the program: it sleeps until the terminal produces output
(or exits), then re-checks. Screen checks re-render the emulated screen, so
they are spaced at least ``SCREEN_CHECK_INTERVAL`` apart during a flood.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import anyio
from anyio.lowlevel import checkpoint

from ether_host.errors import (
    DeadlineExceeded,
    EtherError,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
)
from ether_host.reasons import Reason
from ether_host.terminals.matching import OutputMatcher, compile_regex
from ether_host.terminals.model import ExitInfo, ScreenRequest, ScreenView
from ether_host.terminals.terminal import Terminal

SCREEN_CHECK_INTERVAL = 0.02
OUTPUT_SLICE = 1024 * 1024
MIN_QUIET = 0.01
MAX_QUIET = 3600.0


@dataclass(frozen=True)
class ScreenWait:
    regex: str
    scrollback: bool = False


@dataclass(frozen=True)
class OutputWait:
    regex: str
    after: int | None = None
    raw: bool = False


@dataclass(frozen=True)
class ExitWait:
    pass


@dataclass(frozen=True)
class QuietWait:
    seconds: float


WaitCondition = ScreenWait | OutputWait | ExitWait | QuietWait


@dataclass(frozen=True)
class WaitResult:
    screen: ScreenView
    match: str = ""
    groups: tuple[str, ...] = ()
    start_offset: int = 0
    end_offset: int = 0
    output_offset: int = 0
    exit: ExitInfo | None = None
    waited: float = 0.0


@dataclass(frozen=True)
class WaitFailure:
    """What a failed wait saw last; travels in ``WaitFailed.failure``."""

    screen: ScreenView
    output_offset: int
    exit: ExitInfo | None
    waited: float


@dataclass(kw_only=True)
class WaitFailed(EtherError):
    """A wait that ended without its condition holding, with what it saw last."""

    failure: WaitFailure


class WaitTimedOut(WaitFailed, DeadlineExceeded):
    """The condition did not hold in time (WAIT_TIMEOUT)."""


class WaitEndedByExit(WaitFailed, FailedPrecondition):
    """The program exited before the condition held (PROGRAM_EXITED)."""


def validate(condition: WaitCondition | None) -> WaitCondition:
    if condition is None:
        raise InvalidArgument(
            "WaitFor needs a condition: screen, output, exit or quiet",
            reason=Reason.NO_CONDITION,
            violations=[FieldViolation("condition", "required")],
        )
    if isinstance(condition, ScreenWait):
        compile_regex(condition.regex, "screen.regex")
    elif isinstance(condition, OutputWait):
        compile_regex(condition.regex, "output.regex")
        if condition.after is not None and condition.after < 0:
            raise InvalidArgument(
                f"output.after_offset {condition.after} is negative",
                reason=Reason.INVALID_OFFSET,
                violations=[FieldViolation("output.after_offset", "0 or more")],
            )
    elif isinstance(condition, QuietWait) and not MIN_QUIET <= condition.seconds <= MAX_QUIET:
        raise InvalidArgument(
            f"quiet.duration {condition.seconds:g}s is out of range 10 ms to 1 hour",
            reason=Reason.INVALID_DURATION,
            violations=[FieldViolation("quiet.duration", "10ms to 1h")],
        )
    return condition


async def wait_for(
    session: Terminal, condition: WaitCondition, within: float, request: ScreenRequest
) -> WaitResult:
    """Wait for ``condition``; DEADLINE_EXCEEDED or FAILED_PRECONDITION carry a WaitFailure."""
    started = time.monotonic()
    deadline = started + within
    waiter: _Waiter
    if isinstance(condition, ScreenWait):
        waiter = _ScreenWaiter(session, condition, request)
    elif isinstance(condition, OutputWait):
        waiter = _OutputWaiter(session, condition)
    elif isinstance(condition, QuietWait):
        waiter = _QuietWaiter(session, condition, started)
    else:
        waiter = _ExitWaiter(session)
    while True:
        changed = session.changed.waiter()
        finished = session.finished.is_set()
        found = await waiter.check()
        if found is not None:
            screen = found.screen if found.screen is not None else await session.screen(request)
            return WaitResult(
                screen=dataclasses.replace(screen, scrollback=[])
                if not request.scrollback
                else screen,
                match=found.match,
                groups=found.groups,
                start_offset=found.start,
                end_offset=found.end,
                output_offset=session.buffer.end,
                exit=session.exit,
                waited=time.monotonic() - started,
            )
        if finished and not isinstance(condition, ExitWait):
            raise await _failure(
                session,
                request,
                started,
                WaitEndedByExit,
                Reason.PROGRAM_EXITED,
                f"terminal {session.id}: the program exited ({_describe(session)}) "
                f"before the condition held",
            )
        left = min(deadline, waiter.next_check()) - time.monotonic()
        if time.monotonic() >= deadline:
            raise await _failure(
                session,
                request,
                started,
                WaitTimedOut,
                Reason.WAIT_TIMEOUT,
                f"terminal {session.id}: the condition did not hold within {within:g}s",
            )
        if left > 0:
            with anyio.move_on_after(left):
                await changed.wait()
        await waiter.pace(deadline)


def _describe(session: Terminal) -> str:
    return session.exit.describe() if session.exit else "closed"


async def _failure(
    session: Terminal,
    request: ScreenRequest,
    started: float,
    kind: type[WaitFailed],
    reason: Reason,
    message: str,
) -> WaitFailed:
    screen = await session.screen(request)
    failure = WaitFailure(
        dataclasses.replace(screen, scrollback=[]) if not request.scrollback else screen,
        screen.output_offset,
        session.exit,
        time.monotonic() - started,
    )
    return kind(message, reason=reason, resource=("terminal", session.id), failure=failure)


@dataclass(frozen=True)
class _Found:
    screen: ScreenView | None = None
    match: str = ""
    groups: tuple[str, ...] = ()
    start: int = 0
    end: int = 0


class _Waiter:
    async def check(self) -> _Found | None:
        raise NotImplementedError

    def next_check(self) -> float:
        """Monotonic time of the next check even without output (inf: only on output)."""
        return float("inf")

    async def pace(self, deadline: float) -> None:
        """Space out checks (screen renders) during a flood."""


class _ScreenWaiter(_Waiter):
    def __init__(self, session: Terminal, condition: ScreenWait, request: ScreenRequest) -> None:
        self.session = session
        self.regex = compile_regex(condition.regex, "screen.regex")
        self.request = dataclasses.replace(
            request, scrollback=request.scrollback or condition.scrollback
        )
        self.scrollback = condition.scrollback
        self.last = 0.0

    async def check(self) -> _Found | None:
        self.last = time.monotonic()
        view = await self.session.screen(self.request)
        lines = list(view.lines)
        row = view.cursor.row
        if 0 <= row < len(lines):  # keep the spaces before the cursor: `>>> $` matches a prompt
            lines[row] = lines[row].ljust(view.cursor.col)
        text = "\n".join([*view.scrollback, *lines] if self.scrollback else lines)
        match = self.regex.search(text)
        if match is None:
            return None
        return _Found(view, match.text, match.groups)

    async def pace(self, deadline: float) -> None:
        gap = self.last + SCREEN_CHECK_INTERVAL - time.monotonic()
        if gap > 0:
            await anyio.sleep(min(gap, max(0.0, deadline - time.monotonic())))


class _OutputWaiter(_Waiter):
    def __init__(self, session: Terminal, condition: OutputWait) -> None:
        self.session = session
        buffer = session.buffer
        self.position = (
            buffer.end if condition.after is None else max(condition.after, buffer.start)
        )
        self.regex = compile_regex(condition.regex, "output.regex")
        self.raw = condition.raw
        self.matcher = OutputMatcher(self.regex, self.position, self.raw)

    async def check(self) -> _Found | None:
        buffer = self.session.buffer
        while buffer.end > self.position:
            if self.position < buffer.start:  # the buffer dropped output this wait had not read
                self.position = buffer.start
                self.matcher = OutputMatcher(self.regex, self.position, self.raw)
            data = buffer.read(self.position, OUTPUT_SLICE)
            self.position += len(data)
            found = self.matcher.feed(data)
            if found is not None:
                return _Found(None, found.text, found.groups, found.start_offset, found.end_offset)
            await checkpoint()
        return None


class _ExitWaiter(_Waiter):
    def __init__(self, session: Terminal) -> None:
        self.session = session

    async def check(self) -> _Found | None:
        return _Found() if self.session.finished.is_set() else None


class _QuietWaiter(_Waiter):
    def __init__(self, session: Terminal, condition: QuietWait, started: float) -> None:
        self.session = session
        self.seconds = condition.seconds
        self.started = started

    def _quiet_since(self) -> float:
        return max(self.started, self.session.last_output_clock)

    async def check(self) -> _Found | None:
        return _Found() if time.monotonic() - self._quiet_since() >= self.seconds else None

    def next_check(self) -> float:
        return self._quiet_since() + self.seconds
