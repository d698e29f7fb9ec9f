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

This is also the seam for sandboxing: every spawn of an agent or a terminal gets its argv from
``Containment.wrap``. Given a ``SandboxPolicy`` (sandbox.py), the program runs with new pid,
network (unless the host config gave it the host's), ipc, uts and mount namespaces, and a user
namespace where bwrap can make one (``--disable-userns`` then forbids nested ones); it sees
the system directories read-only, what it runs from read-only, its scratch directory writable
(its HOME and ETHER_SCRATCH), a private /tmp, a fresh /proc and a minimal /dev -- nothing else
of the host's file system. Agents also get ``--new-session``: with no controlling terminal,
a TIOCSTI ioctl cannot push keystrokes into the host's terminal (CVE-2017-5226). Terminals
need job control, so they keep ``setsid --ctty``: their controlling terminal is their own
PTY, so TIOCSTI reaches only their own input. Paths become bwrap option *values* only (all
absolute), and ``--`` ends the options before the program.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from ether_host.procs import children
from ether_host.sandbox import SandboxPolicy

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
# What every sandbox sees read-only, where present (a symlink such as /bin -> usr/bin is made
# the same symlink inside). /etc holds the resolver, certificate and locale settings programs
# read; nothing else of the host (/root, /home, /var, /run, /srv, the state directory) is there.
SYSTEM_READ_ONLY = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
SANDBOX_HOSTNAME = "ether-sandbox"
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
    """How children are started: in a PID namespace (``bwrap`` set) or as before; and whether
    bwrap can also sandbox them here (``sandbox``: the namespaces it makes)."""

    bwrap: str | None
    why_not: str = ""
    version: str = ""
    sandbox: tuple[str, ...] = ()  # namespaces of a sandbox, empty when it cannot make one
    sandbox_why_not: str = ""

    @property
    def active(self) -> bool:
        return self.bwrap is not None

    @property
    def can_sandbox(self) -> bool:
        return self.bwrap is not None and bool(self.sandbox)

    def wrap(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        ctty: bool = False,
        sandbox: SandboxPolicy | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run ``argv`` as a session leader in a namespace of
        its own, with ``env`` -- in ``sandbox`` when given and the machine can make one (the
        caller has refused to start what must not run without it).

        The ids that mark a process as the program's (``MARKERS``) reach only the program, set
        by bwrap: bwrap itself, in the host's view, is none of the program's processes. Not
        contained: terminals get ``setsid --ctty`` as before, agents their own argv (the host
        starts them in a new session itself)."""
        if self.bwrap is None:
            prefix = session_leader(ctty=True) if ctty else []
            return [*prefix, *argv], dict(env)
        marks = [item for name in MARKERS if name in env for item in ("--setenv", name, env[name])]
        outer = {name: value for name, value in env.items() if name not in MARKERS}
        if sandbox is None or not self.can_sandbox:
            options = [*BWRAP_OPTIONS]
            leader = session_leader(ctty=ctty)
        else:
            options = sandbox_options(sandbox, userns="user" in self.sandbox, new_session=not ctty)
            # --new-session puts bwrap's init (and so everything inside) in a session without a
            # terminal; the program still leads one of its own, as without a sandbox.
            leader = session_leader(ctty=ctty)
            outer |= {"HOME": sandbox.scratch, "TMPDIR": "/tmp", "ETHER_SCRATCH": sandbox.scratch}
        return [self.bwrap, *options, *marks, "--", *leader, *argv], outer


def sandbox_options(policy: SandboxPolicy, *, userns: bool, new_session: bool) -> list[str]:
    """bwrap's options for ``policy``: namespaces, then the file system, bind by bind (later
    binds go over earlier ones, so what lives under /tmp is bound after /tmp's tmpfs)."""
    options = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", SANDBOX_HOSTNAME]
    if userns:
        options += ["--unshare-user", "--disable-userns"]
    if policy.network != "host":
        options.append("--unshare-net")  # a loopback of its own only
    options.append("--die-with-parent")
    if new_session:
        options.append("--new-session")
    for path in SYSTEM_READ_ONLY:
        if os.path.islink(path):
            options += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            options += ["--ro-bind", path, path]
    options += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in policy.read_only:
        options += ["--ro-bind", path, path]
    for path in (*policy.read_write, *([policy.scratch] if policy.scratch else [])):
        options += ["--bind", path, path]
    options += ["--chdir", policy.cwd]
    return options


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
        if ok:
            result = _probe_sandbox(found)
    if result.active:
        log.info("children run in PID namespaces of their own", bwrap=result.bwrap)
    else:
        log.warning(
            "children run without PID namespaces: after kill -9 of the host, a process an "
            "agent or a terminal detached (setsid, nohup, a double fork) survives it",
            reason=result.why_not,
        )
    return result


@dataclass(frozen=True)
class Isolation:
    """What isolates agents and terminals on this host, as ``ether serve`` logs it at start
    and GetHostInfo reports it."""

    mode: str  # the host config's [sandbox] mode: auto, required or off
    bubblewrap: str  # its version ("bubblewrap 0.8.0"), empty when missing or unusable
    pid_namespace: bool  # every child in a PID namespace of its own
    namespaces: tuple[str, ...]  # of an agent's sandbox; empty: no sandbox
    why_not: str  # why there is no sandbox (empty when there is one)
    # Resource limits per replica and terminal: resource -> mechanism ("cgroup v2", "rlimit"),
    # filled in by the limits module; empty: none enforced.
    limits: Mapping[str, str] = field(default_factory=dict)

    @property
    def sandboxed(self) -> bool:
        return bool(self.namespaces)


def isolation(mode: str) -> Isolation:
    """This host's isolation under the config's sandbox ``mode`` (probes once)."""
    found = probe()
    namespaces: tuple[str, ...]
    if mode == "off":
        why, namespaces = 'the host config says [sandbox] mode = "off"', ()
    else:
        why, namespaces = found.sandbox_why_not or found.why_not, found.sandbox
    return Isolation(mode, found.version, found.active, namespaces, why)


def _probe_sandbox(bwrap: str) -> Containment:
    """Can bwrap make a sandbox here: with a user namespace (needed where bwrap is not setuid
    and the host not root), else without one (root needs none)?"""
    try:
        version = (
            subprocess.run(
                [bwrap, "--version"], capture_output=True, timeout=PROBE_TIMEOUT, check=False
            )
            .stdout.decode(errors="replace")
            .strip()
        )
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    error = ""
    for userns in (True, False):
        options = sandbox_options(SandboxPolicy("", "/"), userns=userns, new_session=True)
        try:
            run = subprocess.run(
                [bwrap, *options, "--", "true"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as failure:
            error = str(failure)
            continue
        if run.returncode == 0:
            namespaces = ("pid", "net", "ipc", "uts", "mount", *(("user",) if userns else ()))
            return Containment(bwrap, "", version, namespaces)
        error = run.stderr.decode(errors="replace").strip()
    return Containment(bwrap, "", version, (), f"bwrap cannot make a sandbox here: {error}")


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
