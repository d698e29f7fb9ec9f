"""Starting a program on a PTY, and finding every process a terminal started, through /proc."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import resource
import struct
import subprocess
import termios
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ether_host import containment
from ether_host.errors import FailedPrecondition, ResourceExhausted
from ether_host.procs import ChildRegistry, spawn_id_of
from ether_host.reasons import Reason
from ether_host.sandbox import SandboxPolicy

# Making the program a session leader with the PTY as its controlling terminal happens in
# the child before exec. Python code cannot run there: a Python-level fork (ptyprocess,
# pty.fork) runs gRPC's fork handlers in the child, which then aborts ("epoll_wait error:
# Bad file descriptor"). So the child is vforked by subprocess and execs util-linux
# `setsid --ctty` (or, where that is missing, a small Python program doing the same) --
# inside a PID namespace of its own where bubblewrap can make one (containment.py).


def spawn_program(
    children: ChildRegistry,
    argv: list[str],
    env: dict[str, str],
    what: str,
    sandbox: SandboxPolicy | None = None,
    prelude: Sequence[str] = (),
    **options: Any,
) -> tuple[subprocess.Popen[bytes], str, int, bool]:
    """``spawn`` for a terminal's program: a session leader on the PTY its stdin is, in a PID
    namespace of its own when the host can make one (the last item says whether). Contained,
    the process started is bwrap, in a session of its own (so a Ctrl-C for the host does not
    reach it); ``program_pid`` finds the program inside. ``sandbox``: what it may see, where
    the machine can make a sandbox (the caller refused what must not run without one)."""
    contained = containment.probe()
    if contained.active:
        options["start_new_session"] = True

    def wrap(env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        return contained.wrap(argv, env, ctty=True, sandbox=sandbox)

    def limited(env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        wrapped, env = wrap(env)  # ``prelude`` (resources.py) first: its execs keep the pid
        return [*prelude, *wrapped], env

    process, spawn_id, pidfd = spawn(children, argv, env, what, wrap=limited, **options)
    return process, spawn_id, pidfd, contained.active


def program_pid(started: int, contained: bool) -> tuple[int, list[int]] | None:
    """The program's pid once it leads its own session (its process group exists and signals
    reach it), and the processes between it and the host (bwrap's init, which ends after the
    wrapper and becomes the host's zombie); None before. ``started``: what ``spawn_program``
    started."""
    if contained:
        found = containment.find_program(started)
        return (found[0], [found[1]]) if found else None
    session = session_of(started)
    return (started, []) if session is None or session == started else None


def program_status(wait_status: int, contained: bool) -> int:
    """The program's wait status from that of the process ``spawn_program`` started."""
    return containment.program_status(wait_status) if contained else wait_status


# What one terminal holds open in the host: the PTY master, the host's ends of the two pump
# pipes, and pidfds of the program and of both pumps.
DESCRIPTORS_PER_TERMINAL = 6


def descriptor_shortage(error: OSError) -> ResourceExhausted | None:
    """The error to answer when ``error`` says the host ran out of file descriptors."""
    if error.errno not in (errno.EMFILE, errno.ENFILE):
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return ResourceExhausted(
        f"the host is out of file descriptors ({error.strerror}; its limit is {soft}, and each "
        f"terminal holds {DESCRIPTORS_PER_TERMINAL}): close terminals, raise the host's "
        "`ulimit -n`, or lower terminals.max_terminals",
        reason=Reason.FILE_DESCRIPTORS_EXHAUSTED,
        retry_after=1.0,
    )


def spawn(
    children: ChildRegistry,
    argv: list[str],
    env: dict[str, str],
    what: str,
    wrap: Callable[[dict[str, str]], tuple[list[str], dict[str, str]]] | None = None,
    **options: Any,
) -> tuple[subprocess.Popen[bytes], str, int]:
    """Start ``argv`` (vfork + exec) under a spawn id of its own, which its environment
    carries as ETHER_SPAWN_ID; returns the process, its spawn id and a pidfd to watch it by.
    ``wrap`` turns the environment into the argv and environment to start (containment).
    SPAWN_FAILED naming ``what`` when it cannot start."""
    with children.spawning() as spawn_id:
        env = env | {"ETHER_SPAWN_ID": spawn_id}
        argv, env = wrap(env) if wrap is not None else (argv, env)
        try:
            process = subprocess.Popen(argv, env=env, close_fds=True, **options)
        except OSError as error:
            shortage = descriptor_shortage(error)
            if shortage is not None:
                raise shortage from None
            raise FailedPrecondition(
                f"cannot start {what}: {error}", reason=Reason.SPAWN_FAILED
            ) from None
        children.bind(spawn_id, process.pid)
    try:
        pidfd = os.pidfd_open(process.pid)
    except OSError:  # out of descriptors: a process the host cannot watch must not run
        process.kill()
        process.wait()
        children.release(spawn_id)
        raise
    return process, spawn_id, pidfd


def set_window_size(fd: int, rows: int, cols: int) -> None:
    """TIOCSWINSZ: the size the program sees (it gets SIGWINCH when it changes)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def session_of(pid: int) -> int | None:
    """The session id of a process (None when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[3])


def table() -> dict[int, tuple[int, int, int, str, int]]:
    """pid -> (ppid, pgid, sid, state, start time) for every process in /proc."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(name)] = (
            int(fields[1]),
            int(fields[2]),
            int(fields[3]),
            fields[0],
            int(fields[19]),
        )
    return found


def tree(leader: int, spawn_id: str, skip: int | None = None) -> dict[int, int]:
    """Live processes (pid -> start time) of the program ``leader`` started: its process group,
    its session, its descendants, any process carrying its ``ETHER_SPAWN_ID`` and, contained,
    every process of its PID namespace. ``skip``: the bwrap wrapper, which carries the spawn id
    but is no program's (a SIGHUP would kill it, and the namespace with SIGKILL, before the
    programs had their grace)."""
    me = os.getpid()
    procs = table()
    namespace = _pid_namespace(leader) if skip is not None else None
    if namespace == _pid_namespace(me):
        namespace = None  # not contained after all (or gone): never every process of the host
    found = {
        pid
        for pid, (_, pgid, sid, state, _) in procs.items()
        if state != "Z"
        and pid not in (me, skip)
        and (leader in (pgid, sid) or (namespace is not None and _pid_namespace(pid) == namespace))
    }
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_) in procs.items():
        children.setdefault(ppid, []).append(pid)
    stack = [leader]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found and procs[child][3] != "Z":
                found.add(child)
                stack.append(child)
    for pid, (_, _, _, state, _) in procs.items():
        if (
            pid not in found
            and pid not in (me, skip)
            and state != "Z"
            and spawn_id_of(pid) == spawn_id
        ):
            found.add(pid)
    return {pid: procs[pid][4] for pid in found}


def _pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def reap_orphans(known: dict[int, int]) -> list[int]:
    """Collect the zombies among ``known`` (pid -> start time) that were re-parented to us;
    returns those of ``known`` that still run (zombies of another parent do not)."""
    procs = table()
    me = os.getpid()
    running = []
    for pid, started in known.items():
        entry = procs.get(pid)
        # The start time guards against a recycled pid that is now another child of the host.
        if entry is None or entry[4] != started:
            continue
        if entry[0] == me and entry[3] == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        elif entry[3] != "Z":
            running.append(pid)
    return running
