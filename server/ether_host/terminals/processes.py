"""Starting a program on a PTY, and finding every process a terminal started, through /proc."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import resource
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

from ether_host.errors import FailedPrecondition, ResourceExhausted
from ether_host.procs import ChildRegistry, spawn_id_of

# Making the program a session leader with the PTY as its controlling terminal happens in
# the child before exec. Python code cannot run there: a Python-level fork (ptyprocess,
# pty.fork) runs gRPC's fork handlers in the child, which then aborts ("epoll_wait error:
# Bad file descriptor"). So the child is vforked by subprocess and execs util-linux
# `setsid --ctty` (or, where that is missing, a small Python program doing the same).
_SHIM = (
    "import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 1); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


@functools.cache
def session_leader() -> list[str]:
    """The argv prefix that runs a program as a session leader on its stdin's terminal."""
    found = shutil.which("setsid")
    return [found, "--ctty"] if found else [sys.executable, "-c", _SHIM]


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
        reason="FILE_DESCRIPTORS_EXHAUSTED",
        retry_after=1.0,
    )


def spawn(
    children: ChildRegistry, argv: list[str], env: dict[str, str], what: str, **options: Any
) -> tuple[subprocess.Popen[bytes], str, int]:
    """Start ``argv`` (vfork + exec) under a spawn id of its own, which its environment
    carries as ETHER_SPAWN_ID; returns the process, its spawn id and a pidfd to watch it by.
    SPAWN_FAILED naming ``what`` when it cannot start."""
    with children.spawning() as spawn_id:
        try:
            process = subprocess.Popen(
                argv, env=env | {"ETHER_SPAWN_ID": spawn_id}, close_fds=True, **options
            )
        except OSError as error:
            shortage = descriptor_shortage(error)
            if shortage is not None:
                raise shortage from None
            raise FailedPrecondition(
                f"cannot start {what}: {error}", reason="SPAWN_FAILED"
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


def tree(leader: int, spawn_id: str) -> dict[int, int]:
    """Live processes (pid -> start time) of the program ``leader`` started: its process group,
    its session, its descendants, and any process carrying its ``ETHER_SPAWN_ID``."""
    me = os.getpid()
    procs = table()
    found = {
        pid
        for pid, (_, pgid, sid, state, _) in procs.items()
        if state != "Z" and pid != me and leader in (pgid, sid)
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
        if pid not in found and pid != me and state != "Z" and spawn_id_of(pid) == spawn_id:
            found.add(pid)
    return {pid: procs[pid][4] for pid in found}


def reap_orphans(known: dict[int, int]) -> None:
    """Collect the zombies among ``known`` (pid -> start time) that were re-parented to us."""
    procs = table()
    me = os.getpid()
    for pid, started in known.items():
        entry = procs.get(pid)
        # The start time guards against a recycled pid that is now another child of the host.
        if entry is not None and entry[0] == me and entry[3] == "Z" and entry[4] == started:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
