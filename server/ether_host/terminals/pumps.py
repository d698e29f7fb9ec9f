"""The two `cat` processes that move a terminal's bytes between its PTY and the host.

A PTY holds only ~15 KiB on its way from the program to the reader and hands it out 4 KiB per
read, so a program that writes fast (`cat` of a big file, a build log) stalls whenever its
reader is busy for a fraction of a millisecond -- and the host's event loop is busy with
everything else: gRPC, other terminals, agents. Read from the loop, a 20 MB flood reached an
attached client at ~0.75x the speed of a bare reader; a thread reading the PTY did no better,
as it waits for the GIL after every 4 KiB. A `cat` whose only job is read(PTY) -> write(pipe)
drains the PTY as fast as a bare reader does, into a pipe of up to 1 MiB that the host empties
in large reads whenever its loop comes round.

Input goes the other way through a second `cat` and a one-page pipe (so an interrupt that
drops the host's input queue has at most a few KiB ahead of it). The PTY master then stays in
blocking mode for both: O_NONBLOCK belongs to the open file description, which every copy of
the master shares, so the host cannot make its own writes non-blocking without the output
pump's reads failing with EAGAIN. The host keeps the master only for ioctls (size, foreground
group, termios).

Each pump has a spawn id of its own (the sweeper kills one left behind) and carries its
terminal's ETHER_TERMINAL_ID. Both run under ``setpriv --pdeathsig KILL`` (or a Python
prelude doing the same) so that they die with the host: a pump left alive would keep the
master open, and the program would never get the hangup that tells it its terminal is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys

import anyio
import structlog

from ether_host.procs import ChildRegistry, resize_pipe
from ether_host.terminals import processes

log = structlog.get_logger("ether.terminals")

OUTPUT_PIPE = 1024 * 1024  # how far the program may run ahead of the host (pipe-max-size)
INPUT_PIPE = 4096  # one page: little input sits beyond the host's own queue
STOP_WAIT = 5.0

_PDEATHSIG_SHIM = (
    "import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGKILL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


@functools.cache
def _pump_argv() -> list[str]:
    cat = shutil.which("cat") or "/bin/cat"
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, "--pdeathsig", "KILL", "--", cat]
    return [sys.executable, "-c", _PDEATHSIG_SHIM, cat]


class Pumps:
    """The output and input pumps of one terminal, and the host's ends of their pipes."""

    def __init__(self, children: ChildRegistry, terminal_id: str) -> None:
        self._children = children
        self._terminal_id = terminal_id
        self.output = -1  # read end of the output pipe (non-blocking)
        self.input = -1  # write end of the input pipe (non-blocking)
        self._running: dict[int, tuple[str, int]] = {}  # pid -> (spawn id, pidfd)
        self._all_reaped = anyio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, master: int) -> None:
        """Start both pumps on ``master`` (which must be in blocking mode)."""
        self._loop = asyncio.get_running_loop()
        opened: list[int] = []  # every pipe end, for the way out when something fails
        try:
            out_read, out_write = os.pipe()
            opened += (out_read, out_write)
            in_read, in_write = os.pipe()
            opened += (in_read, in_write)
            resize_pipe(out_read, OUTPUT_PIPE)
            resize_pipe(in_read, INPUT_PIPE)
            self._spawn("output", stdin=master, stdout=out_write)
            self._spawn("input", stdin=in_read, stdout=master)
        except BaseException:
            for fd in opened:
                os.close(fd)
            self._kill()
            raise
        os.close(out_write)  # the pumps hold these ends now
        os.close(in_read)
        os.set_blocking(out_read, False)
        os.set_blocking(in_write, False)
        self.output, self.input = out_read, in_write

    def _spawn(self, direction: str, *, stdin: int, stdout: int) -> None:
        env = {"PATH": os.defpath, "LANG": "C", "ETHER_TERMINAL_ID": self._terminal_id}
        process, spawn_id, pidfd = processes.spawn(
            self._children,
            _pump_argv(),
            env | {"ETHER_PUMP": direction},
            f"the terminal's {direction} pump (cat)",
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.DEVNULL,  # cat's "Input/output error" when the PTY closes
            process_group=0,  # signals to the host's group (Ctrl-C) are not for it
        )
        # Reaped from the pidfd, not through Popen (which must not wait on it later).
        process.returncode = 0
        self._running[process.pid] = (spawn_id, pidfd)
        assert self._loop is not None
        self._loop.add_reader(pidfd, self._reap, process.pid)

    def _reap(self, pid: int) -> None:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                return
        spawn_id, pidfd = self._running.pop(pid)
        assert self._loop is not None
        self._loop.remove_reader(pidfd)
        os.close(pidfd)
        self._children.release(spawn_id)
        if not self._running:
            self._all_reaped.set()

    def _kill(self) -> None:
        for pid in self._running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def abort(self) -> None:
        """Close the host's pipe ends and kill both pumps (reaped as they exit)."""
        for fd in (self.output, self.input):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.output = self.input = -1
        self._kill()

    async def stop(self) -> None:
        """``abort``, then wait until both pumps are reaped."""
        self.abort()
        if not self._running:
            return
        with anyio.move_on_after(STOP_WAIT):
            await self._all_reaped.wait()
        if self._running:  # not seen exiting: the host's sweeper takes them from here
            log.warning("terminal pumps not reaped", terminal=self._terminal_id)
