"""Every agent replica and every terminal in a PID namespace of its own, so nothing outlives it.

A child subreaper and a sweeper (procs.py) catch what an agent or a terminal leaves behind only
while the host lives: after ``kill -9`` of the host, a ``setsid sleep &``, a ``nohup`` job or a
double-forked daemon is re-parented to init and runs on. A PID namespace closes that gap in the
kernel: when the namespace's init dies, the kernel SIGKILLs every process in it, however it
detached (sessions, process groups and parents do not matter; a process cannot leave its PID
namespace).

bubblewrap makes the namespace (``bwrap --unshare-pid``). The host starts ``bwrap`` (the
"wrapper"); bwrap starts an init (pid 1 inside, which reaps orphans there) and the program
(pid 2). ``--die-with-parent`` arms PR_SET_PDEATHSIG(SIGKILL) in the wrapper and in the init:
the host dies -> the wrapper dies -> the init dies -> the kernel kills the namespace. (The
wrapper's parent-death signal fires when the host *thread* that spawned it ends: spawn from the
event loop's thread, never from a worker thread, which anyio retires when idle.) And when the
program exits, the wrapper exits with its status, and the init and whatever the program left
die the same way. Cost, on a 2-core VM under load (load average ~11): `bwrap ... true` runs
in ~4-5 ms against 0.6 ms for `true`; an agent runs inside 5-10 ms after its spawn, against
~1 ms without bwrap.

The program runs as a session leader of its own (``setsid``, ``setsid --ctty`` on a PTY), so
it keeps today's signal semantics: its process group is its pid, signals to that group reach
it and its jobs, never the wrapper or the init (a namespace's init ignores every signal but
SIGKILL from outside, and the wrapper would die of them). The pid the host reports is the
program's, as the host sees it; ``kill -9`` of it ends the program, so the wrapper and the
namespace end too. /proc is mounted afresh inside, so ``$$``, ``ps`` and /proc/self agree with
the pids the program sees. Where user namespaces are allowed, bwrap works unprivileged too.

Costs of the wrapper that callers deal with: the wrapper reports a program killed by signal N
as exit code 128+N (``program_status`` turns that back into the signal, as a shell reads it);
and the program's pid is known only once it runs (``program_pid``).

Where bwrap is missing or cannot make a PID namespace (a container without the privilege,
user namespaces turned off), ``probe`` logs one warning and every spawn runs as before:
subreaper and sweeper while the host lives, the adapters' own parent-death checks after.

This is also the seam for sandboxing (no network, read-only binds, rlimits): every spawn of
an agent or a terminal gets its argv from ``Containment.wrap``.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from ether_host.procs import children

log = structlog.get_logger("ether.containment")

# The whole file system as it is (devices too: a terminal's PTY, /dev/null), a fresh /proc for
# the new PID namespace, and the parent-death signal. ``--`` ends bwrap's options: nothing from
# an agent or a user is ever read as one.
BWRAP_OPTIONS = (
    "--dev-bind",
    "/",
    "/",
    "--unshare-pid",
    "--proc",
    "/proc",
    "--die-with-parent",
)
PROBE_TIMEOUT = 10.0
# Environment variables by which the host and its tests recognise a program's processes.
MARKERS = ("ETHER_SPAWN_ID", "ETHER_TERMINAL_ID")

# util-linux setsid, or where that is missing a Python prelude doing the same before exec
# (Python code cannot run between fork and exec in the host: see terminals/processes.py).
_SETSID_SHIM = "import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])"
_SETSID_CTTY_SHIM = (
    "import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 1); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def session_leader(*, ctty: bool) -> list[str]:
    """The argv prefix that runs a program as the leader of a new session (and, with ``ctty``,
    with its stdin's terminal as its controlling terminal)."""
    found = shutil.which("setsid")
    if found:
        return [found, "--ctty"] if ctty else [found]
    return [sys.executable, "-c", _SETSID_CTTY_SHIM if ctty else _SETSID_SHIM]


@dataclass(frozen=True)
class Containment:
    """How children are started: in a PID namespace (``bwrap`` set) or as before."""

    bwrap: str | None
    why_not: str = ""

    @property
    def active(self) -> bool:
        return self.bwrap is not None

    def wrap(
        self, argv: Sequence[str], env: Mapping[str, str], *, ctty: bool = False
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run ``argv`` as a session leader in a namespace of
        its own, with ``env``.

        The ids that mark a process as the program's (``MARKERS``) reach only the program, set
        by bwrap: bwrap itself, in the host's view, is none of the program's processes. Not
        contained: terminals get ``setsid --ctty`` as before, agents their own argv (the host
        starts them in a new session itself)."""
        if self.bwrap is None:
            prefix = session_leader(ctty=True) if ctty else []
            return [*prefix, *argv], dict(env)
        marks = [item for name in MARKERS if name in env for item in ("--setenv", name, env[name])]
        outer = {name: value for name, value in env.items() if name not in MARKERS}
        return [self.bwrap, *BWRAP_OPTIONS, *marks, "--", *session_leader(ctty=ctty), *argv], outer


@functools.cache
def probe() -> Containment:
    """Find bwrap and check once that it can make a PID namespace here; log why not if not.

    Runs a few milliseconds (one ``bwrap ... true``); later calls return the cached answer."""
    found = shutil.which("bwrap")
    if found is None:
        result = Containment(None, "bubblewrap (bwrap) is not installed")
    else:
        try:
            run = subprocess.run(
                [found, *BWRAP_OPTIONS, "--", "true"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT,
                check=False,
            )
            error = run.stderr.decode(errors="replace").strip()
            ok = run.returncode == 0
        except (OSError, subprocess.TimeoutExpired) as failure:
            ok, error = False, str(failure)
        result = Containment(found if ok else None, "" if ok else f"bwrap failed: {error}")
    if result.active:
        log.info("children run in PID namespaces of their own", bwrap=result.bwrap)
    else:
        log.warning(
            "children run without PID namespaces: after kill -9 of the host, a process an "
            "agent or a terminal detached (setsid, nohup, a double fork) survives it",
            reason=result.why_not,
        )
    return result


def program_pid(wrapper: int) -> int | None:
    """The pid (as the host sees it) of the program a bwrap ``wrapper`` runs, once it leads a
    session of its own (from then on signals to its group reach it); None before that."""
    found = find_program(wrapper)
    return found[0] if found else None


def find_program(wrapper: int) -> tuple[int, int] | None:
    """``program_pid`` and the pid of the namespace's init. The init outlives the wrapper by
    a moment and is then re-parented to the host (a subreaper), whose zombie it becomes."""
    for init in children(wrapper):
        for child in children(init.pid):
            if _namespace_pid(child.pid) == 2 and _session_of(child.pid) == child.pid:
                return child.pid, init.pid
    return None


def program_status(wait_status: int) -> int:
    """The wait status of a contained program, from its wrapper's: bwrap exits 128+N for a
    program killed by signal N, which is read back as that signal (as a shell reads it; an
    exit code above 128 of the program's own reads as a signal too)."""
    if os.WIFEXITED(wait_status):
        code = os.WEXITSTATUS(wait_status)
        if code > 128 and code - 128 in signal.valid_signals():
            return code - 128  # the wait status of death by that signal, no core dump
    return wait_status


def program_returncode(returncode: int | None) -> int | None:
    """``program_status`` for a subprocess returncode (negative: killed by that signal)."""
    if returncode is None or returncode < 0:
        return returncode
    return os.waitstatus_to_exitcode(program_status(returncode << 8))


def _namespace_pid(pid: int) -> int | None:
    """The pid of ``pid`` in its innermost PID namespace (the last NSpid field)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return None


def _session_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[3])
