"""Resource limits of every agent replica and every terminal: memory, processes, open files,
file size, CPU time and CPU weight.

The host config's ``[limits.agents]`` and ``[limits.terminals]`` tables set them (defaults in
``AGENT_DEFAULTS`` and ``TERMINAL_DEFAULTS``); an agent's ``agent.toml`` ``[limits]`` may only
lower them (``narrow``); limit_settings.py reads both. Each child gets a control group of its own per controller the host may
use (``<own cgroup>/ether-<host pid>/<agent>-<replica>-<n>`` or ``.../term-<id>``), removed when
it ends; the groups of a host killed with -9 are removed by the next host at start
(``Resources.start``).

Which mechanism enforces what is decided once at start, per resource, and reported by
``Resources.mechanisms`` (logged as "resource limits"):

- memory: the cgroup v1 memory controller (the kernel's OOM killer ends the group's largest
  process past the limit, and ``memory.oom_control`` counts it: the replica's exit reason then
  says "memory limit 64 MiB exceeded"); else RLIMIT_DATA (allocations past it fail in the
  program -- MemoryError, ENOMEM -- which the host cannot see). All children together are
  capped by ``[limits] total_memory`` on the ``ether-<pid>`` memory group, which the host
  itself is not in (memory_total.py); without cgroups there is no total.
- pids: the cgroup v1 pids controller (processes and threads; a fork past it fails with
  EAGAIN, for root too); else RLIMIT_NPROC, which is weak: it counts every process of the
  host's user, not the child's alone, and root is exempt (so as root nothing enforces it).
- open files, file size, CPU time: always rlimits (RLIMIT_NOFILE, RLIMIT_FSIZE, RLIMIT_CPU),
  which are per process: a child's children each get the same allowance.
- CPU weight: the cgroup v1 cpu controller (cpu.shares; 100 is the host's own weight, as in
  systemd's CPUWeight=); no fallback.

The cgroup v2 hierarchy is not used: on this machine kind it has no memory, pids or cpu
controller, and on a pure v2 host it needs delegation the host does not set up (a fallback to
rlimits then, logged).

A child is in its groups before it runs anything: its argv is prefixed (``Group.prelude``) with
a POSIX shell step that writes its own pid into each group's ``cgroup.procs`` and execs the rest
(util-linux ``prlimit`` for the rlimits, then the containment wrapper and the program). The pid
stays the same through the execs, so the pid the host started is the one in the groups.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import anyio
import structlog

from ether_host.limit_settings import (
    AGENT_DEFAULTS,
    TERMINAL_DEFAULTS,
    Limits,
    LimitSettings,
    agent_limits,
    human_size,
    narrow,
)
from ether_host.memory_total import apply_total, default_total, failures, oom_words, reached

log = structlog.get_logger("ether.resources")

CONTROLLERS = ("memory", "pids", "cpu")
PROBE_TIMEOUT = 10.0
REMOVE_LIMIT = 5.0  # seconds to empty and remove a child's groups
# cpu.shares of a group of weight 100 (the weight of the host's own group).
SHARES_PER_WEIGHT = 1024 / 100

# Join the groups named before "--" (their cgroup.procs files), then exec the rest. $$ is the
# shell's pid, which the exec keeps: nothing runs outside the groups.
_JOIN = (
    'while [ "$1" != -- ]; do echo $$ >"$1" || { echo "ether: cannot join the control group '
    '$1" >&2; exit 126; }; shift; done; shift; exec "$@"'
)
# The rlimits where util-linux prlimit is missing: name=soft:hard pairs before "--".
_RLIMIT_SHIM = (
    "import os, resource, sys\n"
    "args = sys.argv[1:]\n"
    "while args[0] != '--':\n"
    "    name, value = args.pop(0).split('=')\n"
    "    soft, hard = (int(v) for v in value.split(':'))\n"
    "    resource.setrlimit(getattr(resource, name), (soft, hard))\n"
    "os.execvp(args[1], args[1:])\n"
)
_PRLIMIT_OPTIONS = {
    "RLIMIT_DATA": "--data",
    "RLIMIT_NPROC": "--nproc",
    "RLIMIT_NOFILE": "--nofile",
    "RLIMIT_FSIZE": "--fsize",
    "RLIMIT_CPU": "--cpu",
}

# -- the kernel's side ------------------------------------------------------------------------


def _v1_mounts() -> dict[str, Path]:
    """controller -> mount point of the cgroup v1 hierarchies that carry it."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        before, _, after = line.partition(" - ")
        parts = after.split()
        if len(parts) >= 3 and parts[0] == "cgroup":
            for option in parts[2].split(","):
                if option in CONTROLLERS:
                    found[option] = Path(before.split()[4])
    return found


def _own_paths() -> dict[str, str]:
    """controller -> this process's cgroup path in its v1 hierarchy."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, names, path = line.split(":", 2)
        for name in names.split(","):
            found[name] = path
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _procs(group: Path) -> list[int]:
    try:
        return [int(line) for line in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _empty_and_remove(group: Path) -> bool:
    """SIGKILL what runs in ``group`` (and its child groups) and remove them; False while a
    process is still there (a fork bomb refilling it, a process still exiting)."""
    done = True
    with contextlib.suppress(OSError):
        for child in [p for p in group.iterdir() if p.is_dir()]:
            done = _empty_and_remove(child) and done
    for pid in _procs(group):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    try:
        group.rmdir()
    except FileNotFoundError:
        return done
    except OSError:
        return False
    return done


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@dataclass
class Group:
    """The control groups and rlimits of one child."""

    limits: Limits
    name: str = ""  # <agent>-<replica>-<n> or a terminal's id
    paths: dict[str, Path] = field(default_factory=dict)  # controller -> its group
    rlimits: dict[str, tuple[int, int]] = field(default_factory=dict)
    prlimit: str | None = None
    # The agents' total memory this child counts towards: its size, the host's group that
    # holds it, and that group's refused charges when this child's group was made.
    total: int = 0
    total_group: Path | None = None
    total_failures_before: int = 0
    # What ``exceeded`` found when the groups were removed (they say nothing after).
    _seen: list[str] | None = None

    def prelude(self) -> list[str]:
        """The argv prefix that puts the child in its groups and under its rlimits before it
        runs: ``[*prelude, *argv]`` is what to start."""
        argv: list[str] = []
        if self.paths:
            procs = [str(path / "cgroup.procs") for path in self.paths.values()]
            argv += ["/bin/sh", "-c", _JOIN, "ether-limits", *procs, "--"]
        if self.rlimits:
            if self.prlimit is not None:
                options = [
                    f"{_PRLIMIT_OPTIONS[name]}={soft}:{hard}"
                    for name, (soft, hard) in self.rlimits.items()
                ]
                argv += [self.prlimit, *options, "--"]
            else:
                pairs = [f"{name}={soft}:{hard}" for name, (soft, hard) in self.rlimits.items()]
                argv += [sys.executable, "-c", _RLIMIT_SHIM, *pairs, "--"]
        return argv

    def exceeded(self) -> list[str]:
        """What the child ran into, in words ("memory limit 64 MiB exceeded"): the memory
        group's OOM kills and the forks the pids group refused."""
        if self._seen is not None:
            return list(self._seen)
        found = []
        memory = self.paths.get("memory")
        if memory is not None and _counter(memory / "memory.oom_control", "oom_kill") > 0:
            total_hit = (
                self.total_group is not None
                and failures(self.total_group) > self.total_failures_before
            )
            found += oom_words(
                failures(memory) > 0 or reached(memory, self.limits.memory),
                human_size(self.limits.memory),
                total_hit,
                human_size(self.total),
            )
        pids = self.paths.get("pids")
        if pids is not None:
            refused = _counter(pids / "pids.events", "max")
            if refused:
                found.append(f"pids limit {self.limits.pids} reached ({refused} forks refused)")
        return found

    @property
    def has_signal_limits(self) -> bool:
        """Whether the child runs under a limit that only its exit signal tells (``explain``):
        CPU time or file size."""
        return bool(self.limits.cpu_time or self.limits.file_size)

    def explain(self, signum: int | None) -> list[str]:
        """``exceeded``, and the rlimit a death by ``signum`` means (SIGXCPU, SIGXFSZ)."""
        found = self.exceeded()
        if signum == signal.SIGXCPU and self.limits.cpu_time:
            found.append(f"CPU time limit {self.limits.cpu_time} s exceeded")
        if signum == signal.SIGXFSZ and self.limits.file_size:
            found.append(f"file size limit {human_size(self.limits.file_size)} exceeded")
        return found

    async def remove(self) -> None:
        """Kill whatever still runs in the groups and remove them (bounded; a group that
        stays busy is logged and left to the next host's start)."""
        if self._seen is None:
            self._seen = self.exceeded()
            if self._seen:  # a terminal has no exit reason to carry it: the log says it
                log.info("a child ran into its limits", child=self.name, limits=self._seen)
        with anyio.move_on_after(REMOVE_LIMIT):
            while self.paths:
                for controller, path in list(self.paths.items()):
                    if _empty_and_remove(path):
                        del self.paths[controller]
                if self.paths:
                    await anyio.sleep(0.01)
        if self.paths:
            log.warning("control groups not removed", groups=[str(p) for p in self.paths.values()])


def _counter(path: Path, name: str) -> int:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        return 0
    return 0


class Resources:
    """The host's limits and how they are enforced: ``start`` once, then a ``Group`` per
    child (``for_agent``, ``for_terminal``)."""

    def __init__(self, settings: LimitSettings | None = None) -> None:
        self.settings = settings or LimitSettings()
        self.bases: dict[str, Path] = {}  # controller -> this host's group (ether-<pid>)
        self.unusable: dict[str, str] = {}  # controller -> why not
        self.prlimit = shutil.which("prlimit")
        self.total = 0  # the agents' total memory in force (bytes), 0: none
        self.total_why_not = ""  # why there is none
        self._serial = itertools.count(1)
        self._root = os.geteuid() == 0

    @classmethod
    def unlimited(cls) -> Resources:
        """No limits at all (parts built without the host's, in tests)."""
        return cls(LimitSettings(agents=Limits(), terminals=Limits(), total_memory=0))

    def start(self) -> None:
        """Remove the groups of dead hosts, find the controllers this host may use (make a
        group, write a limit, start a process in it) and log what enforces each limit."""
        mounts, own = _v1_mounts(), _own_paths()
        for controller in CONTROLLERS:
            if self.settings.mechanism == "rlimit":
                self.unusable[controller] = "limits.mechanism is rlimit"
                continue
            if controller not in mounts or controller not in own:
                self.unusable[controller] = f"no cgroup v1 {controller} hierarchy is mounted"
                continue
            parent = mounts[controller] / own[controller].lstrip("/")
            _remove_stale(parent)
            base = parent / f"ether-{os.getpid()}"
            try:
                base.mkdir(exist_ok=True)
                self.bases[controller] = base
                self._probe(controller, base)
            except (OSError, subprocess.SubprocessError, RuntimeError) as error:
                self.unusable[controller] = f"{base}: {error}"
                self.bases.pop(controller, None)
                with contextlib.suppress(OSError):
                    base.rmdir()
        self._cap_total(mounts, own)
        log.info(
            "resource limits",
            mechanisms=self.mechanisms(),
            agents=self.settings.agents.describe(),
            terminals=self.settings.terminals.describe(),
            total_memory=human_size(self.total) if self.total else "none",
            **({"cgroups_unusable": self.unusable} if self.unusable else {}),
        )
        if self.total_why_not and self.settings.total_memory:
            log.warning(
                "limits.total_memory is not enforced",
                why=self.total_why_not,
                asked=human_size(self.settings.total_memory),
            )

    def _cap_total(self, mounts: Mapping[str, Path], own: Mapping[str, str]) -> None:
        """Cap this host's memory group (all children's groups are under it; the host is
        not) at limits.total_memory, or say why there is no cap."""
        asked = self.settings.total_memory
        base = self.bases.get("memory")
        if asked == 0:
            self.total_why_not = "limits.total_memory is off"
            return
        if base is None:
            why = self.unusable.get("memory", "no cgroup v1 memory group")
            self.total_why_not = f"{why} (rlimits per child only, no total)"
            return
        room = default_total(mounts["memory"], own["memory"])
        total = asked if asked is not None else room
        if asked and room and asked > room:
            log.warning(
                "limits.total_memory leaves the host little room: past 80 % of the machine's "
                "memory (or of the host's own cgroup limit) the kernel may kill the host first",
                total_memory=human_size(asked),
                room=human_size(room),
            )
        if not total:
            self.total_why_not = "the machine's memory size is unknown (set limits.total_memory)"
            return
        try:
            apply_total(base, total)
        except (OSError, ValueError, RuntimeError) as error:
            self.total_why_not = f"{base}: {error} (per-child limits only, no total)"
            return
        self.total = total

    def _probe(self, controller: str, base: Path) -> None:
        probe = base / "probe"
        probe.mkdir(exist_ok=True)
        try:
            _write(probe / _LIMIT_FILES[controller], _PROBE_VALUES[controller])
            run = subprocess.run(
                ["/bin/sh", "-c", _JOIN, "ether-limits", str(probe / "cgroup.procs"), "--", "true"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT,
                check=False,
            )
            if run.returncode != 0:
                raise RuntimeError(run.stderr.decode(errors="replace").strip() or "cannot join")
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()

    def mechanisms(self) -> dict[str, str]:
        """resource -> what enforces it on this host ("cgroup v1 memory", "rlimit RLIMIT_DATA",
        "none: ..."), for the start log and the host's self-description."""
        found = {
            "memory": "cgroup v1 memory" if "memory" in self.bases else "rlimit RLIMIT_DATA",
            "total_memory": (
                f"cgroup v1 memory, {human_size(self.total)} for all agents and terminals "
                f"together (on {self.bases['memory'].name})"
                if self.total
                else f"none: {self.total_why_not or 'not set up yet'}"
            ),
            "pids": (
                "cgroup v1 pids"
                if "pids" in self.bases
                else "none: root is exempt from RLIMIT_NPROC"
                if self._root
                else "rlimit RLIMIT_NPROC (counts every process of the host's user)"
            ),
            "open_files": "rlimit RLIMIT_NOFILE",
            "file_size": "rlimit RLIMIT_FSIZE",
            "cpu_time": "rlimit RLIMIT_CPU",
            "cpu_weight": (
                "cgroup v1 cpu"
                if "cpu" in self.bases
                else f"none: {self.unusable.get('cpu', 'no cgroup cpu controller')}"
            ),
        }
        return found

    def agent_limits(self, asked: Mapping[str, int]) -> Limits:
        """An agent's limits: the host's, lowered by what its agent.toml asks. Deploys are
        refused above the host's (``narrow``); an agent recorded under a host config that has
        since been lowered gets the lower limit."""
        host = self.settings.agents
        lowered = {
            key: value
            if not getattr(host, key)
            else min(value or getattr(host, key), getattr(host, key))
            for key, value in asked.items()
        }
        return replace(host, **lowered)

    def for_agent(self, agent: str, replica: int, limits: Limits) -> Group:
        return self._group(f"{agent}-{replica}-{next(self._serial)}", limits)

    def for_terminal(self, terminal_id: str) -> Group:
        return self._group(terminal_id, self.settings.terminals)

    def _group(self, name: str, limits: Limits) -> Group:
        group = Group(limits, name, prlimit=self.prlimit)
        total_group = self.bases.get("memory") if self.total else None
        if total_group is not None:
            group.total, group.total_group = self.total, total_group
            group.total_failures_before = failures(total_group)
        wanted = {
            "memory": limits.memory,
            "pids": limits.pids,
            "cpu": limits.cpu_weight,
        }
        for controller, value in wanted.items():
            base = self.bases.get(controller)
            # A memory group even without a limit of its own while there is a total: being in
            # it is what makes the child count towards the total.
            needed = value or (controller == "memory" and total_group is not None)
            if not needed or base is None:
                continue
            path = base / name
            try:
                path.mkdir()
                for file, text in _settings(controller, value) if value else []:
                    if (path / file).exists():
                        _write(path / file, text)
            except OSError as error:
                # The rlimit stands in where there is one; the child is never left unlimited
                # without a word.
                log.warning(
                    "cannot make a control group; using the rlimit fallback",
                    group=str(path),
                    error=str(error),
                )
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            group.paths[controller] = path
        self._rlimits(group, limits)
        return group

    def _rlimits(self, group: Group, limits: Limits) -> None:
        wanted = {
            "RLIMIT_NOFILE": limits.open_files,
            "RLIMIT_FSIZE": limits.file_size,
            "RLIMIT_CPU": limits.cpu_time,
        }
        if "memory" not in group.paths:
            wanted["RLIMIT_DATA"] = limits.memory
        if "pids" not in group.paths and not self._root:
            wanted["RLIMIT_NPROC"] = limits.pids
        for name, value in wanted.items():
            if not value:
                continue
            _, hard = resource.getrlimit(getattr(resource, name))
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)  # only root may raise a hard limit
            # CPU time: SIGXCPU at the soft limit (a program may catch it), SIGKILL a second on.
            top = value + 1 if name == "RLIMIT_CPU" and hard == resource.RLIM_INFINITY else value
            group.rlimits[name] = (value, top)

    def close(self) -> None:
        """Remove this host's groups (at its stop; what still runs in them is killed)."""
        for base in self.bases.values():
            _empty_and_remove(base)


_LIMIT_FILES = {"memory": "memory.limit_in_bytes", "pids": "pids.max", "cpu": "cpu.shares"}
_PROBE_VALUES = {"memory": str(1 << 30), "pids": "max", "cpu": "1024"}


def _settings(controller: str, value: int) -> list[tuple[str, str]]:
    """The files that set a limit of ``value`` in a v1 group of ``controller``."""
    if controller == "memory":
        # Swap too, where accounted: otherwise a group swaps past its limit instead of ending.
        return [("memory.limit_in_bytes", str(value)), ("memory.memsw.limit_in_bytes", str(value))]
    if controller == "pids":
        return [("pids.max", str(value))]
    return [("cpu.shares", str(max(2, round(value * SHARES_PER_WEIGHT))))]


def _remove_stale(parent: Path) -> None:
    """Remove the ``ether-<pid>`` groups of hosts that are gone (killed with -9), with
    whatever still runs in them."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for entry in entries:
        match = re.fullmatch(r"ether-(\d+)", entry.name)
        if match is None or not entry.is_dir() or _alive(int(match.group(1))):
            continue
        for _ in range(100):
            if _empty_and_remove(entry):
                log.warning("removed the control groups of a host that is gone", group=str(entry))
                break
        else:
            log.warning("cannot remove the control groups of a host that is gone", group=str(entry))


__all__ = [
    "AGENT_DEFAULTS",
    "TERMINAL_DEFAULTS",
    "Group",
    "LimitSettings",
    "Limits",
    "Resources",
    "agent_limits",
    "narrow",
]
