"""Every child process the host starts, and the orphans they leave behind.

The host is a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): when an
agent dies, its descendants are re-parented to the host instead of init. The
registry knows the processes the host started itself (each gets an
``ETHER_SPAWN_ID`` in its environment); any other child is an orphan of one
of them. The reaper kills live orphans whose spawn has ended and collects
zombies, so nothing an agent or a terminal started outlives it -- while the host lives.
After ``kill -9`` of the host only a PID namespace per child holds (containment.py); the
registry and the sweeper are what remains where bubblewrap cannot make one.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import itertools
import json
import os
import signal
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import structlog

log = structlog.get_logger("ether.procs")
PR_SET_CHILD_SUBREAPER = 36

# A contained agent's pid is its program's (containment.py); the host's child is the bwrap
# wrapper around it, which the sweeper must leave to the code that waits on it (reaping it
# first would lose the exit status). Program pid -> wrapper pid, kept by supervisor/pipes.py.
wrappers: dict[int, int] = {}


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process. False when unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


# CPU scheduling policies an unprivileged host may give its children, by the names systemd's
# CPUSchedulingPolicy= uses. "batch" is a normal share of the CPU without wakeup preemption.
# Where the platform has no such policy (not Linux), setting it is a no-op.
CPU_POLICIES = ("other", "batch", "idle")


def resize_pipe(fd: int, size: int) -> None:
    """Ask for a pipe of ``size`` bytes. Bounded by /proc/sys/fs/pipe-max-size and the user's
    pipe-user-pages-soft; the default 64 KiB still works, only less well."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)


def set_cpu_policy(pid: int, policy: str) -> None:
    """Give every thread of ``pid`` the named CPU scheduling policy. Threads and processes
    started later inherit it from the thread that starts them, so calling this right after
    spawn and again once the runtime has started its own threads covers a process for good.
    A thread that is gone or refuses is skipped, never an error."""
    _set_policy(pid, policy, skip=None)


async def keep_helper_threads_batched(interval: float = 5.0) -> None:
    """Put every thread of this process but the main one under SCHED_BATCH, now and every
    ``interval`` s (threads come and go: anyio's workers expire when idle, gRPC's pool grows
    under load, and the main thread's new ones start with its own policy).

    The main thread runs the event loop; gRPC's event engine, its timer and anyio's workers
    only feed it. Woken by the main thread, or by a socket while the main thread runs, a
    batch thread takes a free CPU or waits for the main thread's next wait instead of
    preempting it in the middle of a turn (bench: Execute at one call in flight ~14 % faster).
    """
    while True:
        _set_policy(os.getpid(), "batch", skip=os.getpid())
        await anyio.sleep(interval)


def _set_policy(pid: int, policy: str, skip: int | None) -> None:
    number = getattr(os, f"SCHED_{policy.upper()}", None)
    if number is None or not hasattr(os, "sched_setscheduler"):
        return
    try:
        tids = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return
    for tid in tids:
        if tid != skip:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(tid, number, os.sched_param(0))


@dataclass(frozen=True)
class ProcEntry:
    """A process as /proc shows it."""

    pid: int
    ppid: int
    pgid: int
    state: str


def read_proc(pid: int) -> ProcEntry | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return ProcEntry(pid, int(fields[1]), int(fields[2]), fields[0])


def all_processes() -> Iterator[ProcEntry]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            entry = read_proc(int(name))
            if entry is not None:
                yield entry


def children(pid: int) -> Iterator[ProcEntry]:
    """The children of ``pid``: from each thread's ``children`` file (a few small reads), or
    by scanning every process when the kernel has no such files (CONFIG_PROC_CHILDREN)."""
    task_dir = f"/proc/{pid}/task"
    try:
        tids = os.listdir(task_dir)
        listed = [Path(f"{task_dir}/{tid}/children").read_text().split() for tid in tids]
    except OSError:
        yield from (entry for entry in all_processes() if entry.ppid == pid)
        return
    for child in {int(text) for pids in listed for text in pids}:
        entry = read_proc(child)
        if entry is not None and entry.ppid == pid:
            yield entry


def group_gone(pgid: int) -> bool:
    """Whether no process at all is left in the group, not even a zombie: one kill(2) of
    signal 0, where group_members reads every process of the machine in /proc."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # a member that is not ours to signal: still a member
        return False
    return False


def group_members(pgid: int) -> list[ProcEntry]:
    """Live (non-zombie) processes of a process group."""
    return [p for p in all_processes() if p.pgid == pgid and p.state != "Z"]


def spawn_id_of(pid: int) -> str | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in environ.split(b"\0"):
        if item.startswith(b"ETHER_SPAWN_ID="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def kill_leftovers(record: Path) -> int:
    """Kill the process groups a previous host left running (it died without cleaning up).

    Each entry carries the pid's start time, so a pid reused by an unrelated
    process since then is never touched.
    """
    try:
        entries = json.loads(record.read_text())
    except (OSError, ValueError):
        return 0
    killed = 0
    for entry in entries if isinstance(entries, list) else []:
        pid, started = int(entry.get("pid", 0)), entry.get("start_time")
        now = start_time(pid)
        # Same leader (same start time), or the leader is gone but its group lives on: a
        # pid number stays reserved while it names a live group, so that group is ours.
        if (
            pid > 0
            and started is not None
            and (now == started or (now is None and group_members(pid)))
        ):
            log.warning("killing a process group left by a previous host", pid=pid)
            kill_group(pid, signal.SIGKILL)
            killed += 1
    with contextlib.suppress(OSError):
        record.unlink()
    return killed


class ChildRegistry:
    """Spawn ids of the host's own children and the pids they got.

    With a ``record`` file, the group leaders alive right now are written
    there, so that the next host can kill what this one leaves behind if it
    is killed with no chance to stop its agents.
    """

    def __init__(self, record: Path | None = None) -> None:
        self._ids = itertools.count(1)
        self._pids: dict[str, int | None] = {}
        self._prefix = f"{os.getpid()}-"
        self._record = record
        self._leaders: dict[int, int | None] = {}

    def track_group(self, pid: int) -> None:
        """Remember a process group leader (an agent) in the record file."""
        self._leaders[pid] = start_time(pid)
        self._save()

    def untrack_group(self, pid: int) -> None:
        self._leaders.pop(pid, None)
        self._save()

    def _save(self) -> None:
        if self._record is None:
            return
        entries = [{"pid": pid, "start_time": started} for pid, started in self._leaders.items()]
        with contextlib.suppress(OSError):
            self._record.write_text(json.dumps(entries))

    @contextlib.contextmanager
    def spawning(self) -> Iterator[str]:
        """Reserve a spawn id for a process about to start; bind its pid inside."""
        spawn_id = f"{self._prefix}{next(self._ids)}"
        self._pids[spawn_id] = None
        try:
            yield spawn_id
        except BaseException:
            self._pids.pop(spawn_id, None)
            raise

    def bind(self, spawn_id: str, pid: int) -> None:
        self._pids[spawn_id] = pid

    def release(self, spawn_id: str) -> None:
        """The process has been reaped; its leftovers are now orphans."""
        self._pids.pop(spawn_id, None)

    @property
    def own_pids(self) -> set[int]:
        return _with_wrappers(pid for pid in self._pids.values() if pid is not None)

    @property
    def busy(self) -> bool:
        return any(pid is None for pid in self._pids.values())

    def sweep(self) -> int:
        """Kill live orphans and reap zombie orphans. Returns how many were handled."""
        me = os.getpid()
        # This runs in a worker thread while the event loop adds and removes spawns. The
        # children are listed first, then the spawns copied (dict() is atomic under the GIL):
        # a child started between the two has its spawn id in the copy. The other way round, a
        # child started after the copy was listed without it and killed as an orphan -- a
        # terminal's output pump while 100 terminals were being created, its program then
        # blocked for good on a full PTY (bench/scale_terminals.py found it).
        listed = list(children(me))
        spawns = dict(self._pids)
        own = _with_wrappers(pid for pid in spawns.values() if pid is not None)
        busy = any(pid is None for pid in spawns.values())
        handled = 0
        for entry in listed:
            if entry.pid in own:
                continue
            if entry.state == "Z":
                if busy:
                    continue  # a just-spawned child may not have its pid bound yet
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(entry.pid, os.WNOHANG)
                    handled += 1
                continue
            spawn_id = spawn_id_of(entry.pid)
            if spawn_id is None or not spawn_id.startswith(self._prefix):
                continue
            if spawn_id in spawns:
                continue  # its spawn still runs: a daemon it started may outlive a parent, not it
            log.info("killing orphan", pid=entry.pid, pgid=entry.pgid, spawn_id=spawn_id)
            with contextlib.suppress(ProcessLookupError):
                os.kill(entry.pid, signal.SIGKILL)
            handled += 1
        return handled

    async def run_reaper(self, interval: float = 1.0) -> None:
        """Sweep forever; owned by the host's task group."""
        while True:
            try:
                await anyio.to_thread.run_sync(self.sweep)
            except Exception:  # a sweeper bug must never take the host down
                log.exception("orphan sweep failed")
            await anyio.sleep(interval)


def _with_wrappers(pids: Iterable[int]) -> set[int]:
    own = set(pids)
    known = dict(wrappers)  # the sweep runs in a worker thread: a snapshot (atomic under the GIL)
    return own | {known[pid] for pid in own if pid in known}


def kill_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
