"""One terminal: a program on a PTY, its output buffer, its input queue and its screen.

Two `cat` pumps move the bytes between the PTY and pipes (pumps.py): the output pipe is
drained on the event loop, read straight into the OutputBuffer's ring, with no parsing in
the read path beyond a cheap scan for the few things that cannot wait (mode switches that
change what keys send, and queries a terminal must answer); input is queued and written to
the input pipe as it takes it. The program's exit is seen through a pidfd, so a grandchild
holding the PTY open cannot hide it. The emulator is fed only when someone reads the
screen, in a worker thread (screen_feed.py). Ending one ends every process the program
started (ending.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable

import anyio
import structlog

from ether_host.errors import EtherError, FailedPrecondition, QuotaViolation, ResourceExhausted
from ether_host.procs import ChildRegistry, start_time
from ether_host.reasons import Reason
from ether_host.resources import Group
from ether_host.sandbox import SandboxPolicy
from ether_host.terminals import processes
from ether_host.terminals.buffer import Notifier, OutputBuffer
from ether_host.terminals.ending import ProcessEnding
from ether_host.terminals.input import InputQueue, interrupt_at
from ether_host.terminals.model import (
    ExitInfo,
    InputAccepted,
    ScreenRequest,
    ScreenView,
    TerminalInfo,
    TerminalState,
)
from ether_host.terminals.policy import Program
from ether_host.terminals.pumps import Pumps
from ether_host.terminals.recording import EXITED, Recorder
from ether_host.terminals.screen_feed import ScreenFeed
from ether_host.terminals.settings import MAX_SIZE, TerminalSettings

log = structlog.get_logger("ether.terminals")

READ_SIZE = 256 * 1024
READS_PER_WAKE = 8  # the output pipe holds up to 1 MiB
NOTIFY_GAP = 0.005  # during a flood, readers are woken at most this often
EXIT_SETTLE = 0.1  # after the program exits, how long to wait for the PTY's last bytes
RECORD_WAIT = 10.0  # how long a close waits for the exit's record before going on without it

_PRIVATE_MODES = re.compile(rb"\x1b\[\?([0-9;]+)([hl])")
_QUERIES = re.compile(rb"\x1b\[(?:0?c|>0?c|5n|\??6n)|\x1bc")
DA1_REPLY = b"\x1b[?1;2c"
DA2_REPLY = b"\x1b[>84;0;0c"
DSR_REPLY = b"\x1b[0n"


def clamp_size(value: int, current: int) -> int:
    """0 keeps ``current``; other values are clamped to 1..MAX_SIZE."""
    return current if value == 0 else max(1, min(MAX_SIZE, value))


class Terminal:
    """A program running on a PTY."""

    def __init__(
        self,
        *,
        terminal_id: str,
        name: str,
        owner: str,
        program: Program,
        env: dict[str, str],
        cwd: str,
        rows: int,
        cols: int,
        term: str,
        scrollback_lines: int,
        idle_timeout: float,
        max_lifetime: float,
        settings: TerminalSettings,
        children: ChildRegistry,
        on_exit: Callable[[Terminal], None],
        spawn_task: Callable[..., None],
        record_exit: Callable[[Terminal, ScreenView], Awaitable[None]] | None = None,
        sandbox: SandboxPolicy | None = None,
    ) -> None:
        self.id = terminal_id
        self.sandbox = sandbox
        self.name = name
        self.owner = owner
        self.program = program
        self.cwd = cwd
        self.rows = rows
        self.cols = cols
        self.term = term
        self.scrollback_lines = scrollback_lines
        self.idle_timeout = idle_timeout
        self.max_lifetime = max_lifetime
        self.created_at = time.time()
        self.created_clock = time.monotonic()
        self.last_activity_clock = self.created_clock
        self.last_output_clock = self.created_clock
        self.buffer = OutputBuffer(settings.output_buffer)
        self.changed = Notifier()
        self.attached = 0
        self.input_bytes = 0  # queued for the program since it started (metrics)
        self.exit: ExitInfo | None = None
        self.closed = False
        self.app_cursor = False
        self.bracketed_paste = False
        self._env = env
        self._settings = settings
        self._children = children
        self._on_exit = on_exit
        self._spawn_task = spawn_task
        self._record_exit = record_exit
        self._ending = False  # the program is reaped and its exit is being recorded
        self._screen = ScreenFeed(self.buffer, rows, cols, scrollback_lines)
        self._input = InputQueue()
        self._eof = False
        self._reaped_status: ExitInfo | None = None
        self._reaped = anyio.Event()
        self._finished = anyio.Event()
        self._terminating = False
        self._terminated = anyio.Event()
        self._settle: asyncio.TimerHandle | None = None
        self._notify_timer: asyncio.TimerHandle | None = None
        self._last_notify = 0.0
        self._echo_due = False  # input went in since the last output: its echo goes out at once
        self._process: subprocess.Popen[bytes] | None = None
        self._fd = -1  # the PTY master: sizes, foreground group, termios
        self._pumps = Pumps(children, terminal_id)
        self._pidfd = -1
        self._contained = False  # in a PID namespace: the process started is bwrap's
        self._between: dict[int, int] = {}  # bwrap's init (pid -> start time)
        self.pid = 0
        self.spawn_id = ""
        self.limits: Group | None = None  # control groups and rlimits (set by the manager)
        self.recorder: Recorder | None = None  # its asciicast, when recorded (recording.py)
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- start ---------------------------------------------------------------------------

    def start(self) -> None:
        """Spawn the program on a new PTY (vfork + exec, a few ms) and start draining it."""
        try:
            self._start()
        except OSError as error:
            shortage = processes.descriptor_shortage(error)
            if shortage is None:
                raise
            raise shortage from None

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        master, slave = os.openpty()
        try:
            processes.set_window_size(master, self.rows, self.cols)
            self._pumps.start(master)  # first: the program's first bytes have a reader
            # No LINES/COLUMNS: they would override the PTY's size and go stale on resize.
            env = self._env | {"TERM": self.term, "ETHER_TERMINAL_ID": self.id}
            process, spawn_id, self._pidfd, self._contained = processes.spawn_program(
                self._children,
                list(self.program.argv),
                env,
                repr(self.program.display_argv[0]),
                self.sandbox,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                prelude=self.limits.prelude() if self.limits is not None else (),
                cwd=self.cwd,
            )
        except BaseException:
            self._pumps.abort()
            os.close(master)
            raise
        finally:
            os.close(slave)
        self._process = process
        self.spawn_id = spawn_id
        self.pid = process.pid
        self._fd = master
        self._loop.add_reader(self._pumps.output, self._on_readable)
        self._input.open(self._pumps.input)
        self._loop.add_reader(self._pidfd, self._on_child_exit)

    async def established(self, limit: float = 5.0) -> None:
        """Return once the program leads its own session (or has exited): from then on its
        process group exists and signals reach it. Takes a millisecond or two after start."""
        deadline = time.monotonic() + limit
        while not self._reaped.is_set() and time.monotonic() < deadline:
            assert self._process is not None
            program = processes.program_pid(self._process.pid, self._contained)
            if program is not None:
                self.pid, between = program  # contained: the program inside, not bwrap
                self._between.update({pid: start_time(pid) or 0 for pid in between})
                break
            await anyio.sleep(0.001)
        log.info(
            "terminal started",
            terminal=self.id,
            pid=self.pid,
            argv=list(self.program.display_argv),
            owner=self.owner,
        )

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> TerminalState:
        if self.closed:
            return TerminalState.CLOSED
        return TerminalState.RUNNING if self.exit is None else TerminalState.EXITED

    @property
    def finished(self) -> anyio.Event:
        """Set once the program has exited and its last output was read."""
        return self._finished

    @property
    def pending_input(self) -> int:
        return self._input.pending

    def info(self) -> TerminalInfo:
        return TerminalInfo(
            id=self.id,
            name=self.name,
            owner=self.owner,
            argv=self.program.display_argv,
            cwd=self.cwd,
            rows=self.rows,
            cols=self.cols,
            term=self.term,
            scrollback_lines=self.scrollback_lines,
            state=self.state,
            pid=self.pid,
            created_at=self.created_at,
            last_activity_at=self.last_activity_at,
            exit=self.exit,
            output_offset=self.buffer.end,
            retained_offset=self.buffer.start,
            attached_clients=self.attached,
            idle_timeout=self.idle_timeout,
            max_lifetime=self.max_lifetime,
        )

    @property
    def last_activity_at(self) -> float:
        """Wall-clock time of the last input or output."""
        return self.created_at + (self.last_activity_clock - self.created_clock)

    def _touch(self) -> None:
        self.last_activity_clock = time.monotonic()

    def _notify(self) -> None:
        self.changed.notify()

    # -- output --------------------------------------------------------------------------

    def _on_readable(self) -> None:
        # Read until the output pipe is empty (at most READS_PER_WAKE reads), and never more in
        # one wake than the ring holds: the recording and the escape scan below take this
        # wake's bytes from the ring, and a small output_buffer would have overwritten some
        # (what is left waits in the pipe for the next wake).
        buffer = self.buffer
        fd = self._pumps.output
        began = buffer.end
        for _ in range(READS_PER_WAKE):
            room = buffer.capacity - (buffer.end - began)
            if room <= 0:
                break
            try:
                if not buffer.read_from(fd, min(READ_SIZE, room)):
                    self._on_eof()
                    break
            except BlockingIOError:
                break
            except OSError:  # the pipe is closed
                self._on_eof()
                break
        if buffer.end == began:
            return
        if self.recorder is not None and self.recorder.active:
            start = max(began, buffer.start)
            self.recorder.output(buffer.read(start, buffer.end - start))
        if buffer.find(b"\x1b", began):
            self._scan(buffer.read(began, buffer.end - began))
        now = time.monotonic()
        self.last_output_clock = self.last_activity_clock = now
        self._notify_soon(now)

    def _notify_soon(self, now: float) -> None:
        """Wake readers now, or, during a flood, at most every NOTIFY_GAP seconds: each wake-up
        then finds a few hundred KiB to pass on instead of one read's few KiB. The first output
        after input is never held: a key typed right after the last echo (or during a flood)
        gets its echo at once, at the cost of at most one extra wake-up per write."""
        if self._echo_due:
            self._echo_due = False
            if self._notify_timer is not None:
                self._notify_timer.cancel()
                self._notify_timer = None
            self._last_notify = now
            self._notify()
            return
        if self._notify_timer is not None:
            return
        wait = self._last_notify + NOTIFY_GAP - now
        if wait <= 0:
            self._last_notify = now
            self._notify()
        else:
            assert self._loop is not None
            self._notify_timer = self._loop.call_later(wait, self._deferred_notify)

    def _deferred_notify(self) -> None:
        self._notify_timer = None
        self._last_notify = time.monotonic()
        self._notify()

    def _scan(self, data: bytes) -> None:
        """Track the modes that change what keys send, and answer terminal queries."""
        for match in _PRIVATE_MODES.finditer(data):
            on = match.group(2) == b"h"
            for number in match.group(1).split(b";"):
                if number == b"1":
                    self.app_cursor = on
                elif number == b"2004":
                    self.bracketed_paste = on
        if b"c" not in data and b"n" not in data:
            return
        for match in _QUERIES.finditer(data):
            query = match.group(0)
            if query == b"\x1bc":
                self.app_cursor = self.bracketed_paste = False
            elif query.endswith(b"c"):
                self._reply(DA2_REPLY if b">" in query else DA1_REPLY)
            elif query == b"\x1b[5n":
                self._reply(DSR_REPLY)
            else:
                offset = self.buffer.end - len(data) + match.end()
                self._spawn_task(self._answer_cursor_query, offset)

    def _reply(self, data: bytes) -> None:
        if self.exit is None and self._fd >= 0:
            self._input.put(data)

    async def _answer_cursor_query(self, offset: int) -> None:
        """CPR needs the cursor position at the query's offset: the emulator catches up to it."""
        self._reply(await self._screen.cursor_report(offset))

    def _on_eof(self) -> None:
        if self._eof:
            return
        self._eof = True
        if self._loop is not None and self._pumps.output >= 0:
            self._loop.remove_reader(self._pumps.output)
        if self._reaped_status is not None:
            self._finish()

    def _on_child_exit(self) -> None:
        assert self._process is not None
        try:
            pid, status = os.waitpid(self._process.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self._process.pid, 0
        if pid == 0:
            return
        status = processes.program_status(status, self._contained)
        assert self._loop is not None
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = -1
        self._reaped_status = ExitInfo.from_wait_status(status)
        if self._process is not None:
            self._process.returncode = os.waitstatus_to_exitcode(
                status
            )  # reaped: Popen must not wait
        self._children.release(self.spawn_id)
        self._reaped.set()
        if not self._eof:
            self._on_readable()  # what is already in the pipe
        if self._eof:
            self._finish()
        else:
            self._settle = self._loop.call_later(EXIT_SETTLE, self._finish)

    def _finish(self) -> None:
        if self._ending or self.exit is not None or self._reaped_status is None:
            return
        self._ending = True
        if self._settle is not None:
            self._settle.cancel()
        self._input.drop()
        self._touch()
        if self._record_exit is None:
            self._publish_exit()
            return
        try:
            self._spawn_task(self._record_then_publish)
        except EtherError:  # the terminal service is not running: nothing records
            self._publish_exit()

    async def _record_then_publish(self) -> None:
        """Record the exit status and the last screen, then let readers see the exit.

        The exit becomes visible (WaitFor, Attach's `exit`, GetTerminal, the `exited`
        event) only once its record is committed: a client told that the program exited
        can still read how it ended after the host is killed and restarted.
        """
        assert self._record_exit is not None and self._reaped_status is not None
        try:
            with anyio.CancelScope(shield=True):
                view = await self._final_screen(self._reaped_status)
                await self._record_exit(self, view)
        except Exception:  # a full disk must not leave the exit unreported
            log.exception("could not record the terminal's exit", terminal=self.id)
        finally:
            self._publish_exit()

    def _publish_exit(self) -> None:
        if self.exit is not None or self._reaped_status is None:
            return
        self.exit = self._reaped_status
        if self.recorder is not None:
            self.recorder.stop(EXITED)
        self._finished.set()
        log.info("terminal exited", terminal=self.id, pid=self.pid, status=self.exit.describe())
        self._notify()
        self._on_exit(self)

    def read_output(self, offset: int, limit: int) -> bytes:
        return self.buffer.read(offset, limit)

    # -- input ---------------------------------------------------------------------------

    def write(self, data: bytes) -> InputAccepted:
        """Queue ``data`` for the program.

        An interrupt (the terminal's INTR, QUIT or SUSP character with ISIG on) jumps the
        queue: the kernel drops unread input when it signals the program anyway, so a
        Ctrl-C typed behind a 10 MB paste acts at once instead of after the paste.
        """
        if self.exit is not None or self._fd < 0:
            raise self._exited_error("cannot write input")
        discarded = 0
        if self._input.pending:
            cut = interrupt_at(self._fd, data)
            if cut >= 0:
                discarded = self._input.drop() + cut
                data = data[cut:]
                log.info("input dropped by an interrupt", terminal=self.id, discarded=discarded)
        if self._input.pending + len(data) > self._settings.input_queue:
            raise ResourceExhausted(
                f"terminal {self.id}: the input queue holds {self._input.pending} bytes and {len(data)} more would "
                f"exceed its {self._settings.input_queue} bytes; retry once the program has read it",
                reason=Reason.INPUT_QUEUE_FULL,
                retry_after=1.0,
                resource=("terminal", self.id),
                quota_violations=[QuotaViolation(f"terminal:{self.id}", "input queue bytes")],
            )
        self._touch()
        self._input.put(data)
        self.input_bytes += len(data)
        self._echo_due = True
        return InputAccepted(len(data), self._input.pending, discarded)

    def start_recording(self, recorder: Callable[[], Recorder]) -> Recorder:
        """Record from now on with a new ``recorder()`` (an earlier recording is discarded);
        while already recording, the current recorder."""
        if self.exit is not None or self._ending:
            raise self._exited_error("cannot start recording")
        if self.recorder is not None and self.recorder.active:
            return self.recorder
        if self.recorder is not None:
            self.recorder.remove()
        self.recorder = recorder()
        return self.recorder

    def _exited_error(self, what: str) -> FailedPrecondition:
        status = self.exit.describe() if self.exit else "closed"
        metadata = {"state": self.state.value}
        if self.exit is not None:
            metadata["exit_code" if self.exit.code is not None else "signal"] = str(
                self.exit.code if self.exit.code is not None else self.exit.signal_name
            )
        return FailedPrecondition(
            f"{what}: terminal {self.id} has exited ({status})",
            reason=Reason.TERMINAL_EXITED,
            metadata=metadata,
            resource=("terminal", self.id),
        )

    # -- size and signals ----------------------------------------------------------------

    def resize(self, rows: int, cols: int) -> tuple[int, int]:
        if self.exit is not None or self._fd < 0:
            raise self._exited_error("cannot resize")
        rows, cols = clamp_size(rows, self.rows), clamp_size(cols, self.cols)
        if (rows, cols) != (self.rows, self.cols):
            processes.set_window_size(self._fd, rows, cols)
            self.rows, self.cols = rows, cols
            if self.recorder is not None:
                self.recorder.resize(rows, cols)
            self._screen.resized(rows, cols)
        return rows, cols

    def send_signal(self, signum: int, foreground: bool) -> int:
        """Signal the program's process group (or the PTY's foreground group); returns the group."""
        if self.exit is not None or self._fd < 0:
            raise self._exited_error("cannot send a signal")
        group = self.pid
        if foreground:
            with contextlib.suppress(OSError):
                group = os.tcgetpgrp(self._fd)
        try:
            os.killpg(group, signum)
        except ProcessLookupError:
            raise self._exited_error("cannot send a signal") from None
        return group

    # -- screen --------------------------------------------------------------------------

    async def screen(self, request: ScreenRequest) -> ScreenView:
        """The screen with every byte of output read so far."""
        return await self._screen.render(request, lambda: self.exit)

    async def _final_screen(self, exit_info: ExitInfo) -> ScreenView:
        """The last screen, with every cell (a reader of the record may want them)."""
        return await self._screen.render(
            ScreenRequest(keep_trailing_spaces=True), lambda: exit_info
        )

    # -- ending --------------------------------------------------------------------------

    async def terminate(self, grace: float) -> None:
        """End the program and everything it started; reap it; release the PTY."""
        if self._terminating:
            await self._terminated.wait()
            return
        self._terminating = True
        try:
            wrapper = self._process.pid if self._contained and self._process is not None else None
            ending = ProcessEnding(
                self.id, lambda: self.pid, self.spawn_id, wrapper, self._between, self._reaped
            )
            with anyio.CancelScope(shield=True):
                await ending.run(grace)
        finally:
            self._release()
            with anyio.CancelScope(shield=True):
                await self._pumps.stop()
                if self.limits is not None:  # kills what is left in them (a fork bomb's)
                    await self.limits.remove()
                # The close is reported after the exit it caused, and after its record.
                with anyio.move_on_after(RECORD_WAIT):
                    await self._finished.wait()
                self._publish_exit()
            self._terminated.set()

    def _release(self) -> None:
        """Close the PTY and stop watching the program (the pumps end in terminate)."""
        if self._notify_timer is not None:
            self._notify_timer.cancel()
            self._notify_timer = None
        loop = self._loop
        if loop is not None:
            if self._pumps.output >= 0 and not self._eof:
                self._eof = True
                loop.remove_reader(self._pumps.output)
            self._input.close()
            if self._pidfd >= 0:
                loop.remove_reader(self._pidfd)
                os.close(self._pidfd)
                self._pidfd = -1
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = -1
        if self._reaped_status is None:  # reaped by someone else (the host's sweeper)
            self._reaped_status = ExitInfo(None, signal.SIGKILL)
            if self._process is not None:
                self._process.returncode = -signal.SIGKILL
            self._children.release(self.spawn_id)
        self._finish()
