"""Resource limits of terminals (resources.py): a fork bomb typed into a terminal fills that
terminal's pids cgroup and no more, the host and other terminals answer meanwhile, and closing
the terminal leaves nothing of the bomb. The bomb runs only once the host says a pids cgroup
holds it: without one it would take the machine.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.resources import PIDS_ROOT, marked, mechanisms, refused_forks
from tests.terminals.conftest import CONFIG, start_host
from tests.terminals.support import close, processes_of, shell, wait_screen, write

BUDGET = 60.0  # seconds for the kernel and the host to act, on a loaded 2-core machine
PIDS = 48

pytestmark = pytest.mark.skipif(
    not os.access(PIDS_ROOT, os.W_OK), reason="no writable cgroup v1 pids hierarchy"
)


def test_a_fork_bomb_in_a_terminal_is_contained(tmp_path: Path) -> None:
    """`:(){ :|:& };:` under a pids limit of 48: the terminal's group refuses forks past it,
    another terminal starts and runs a command meanwhile, and once the terminal is closed no
    process of the bomb is left and its group is gone."""
    config = CONFIG + f"[limits.terminals]\npids = {PIDS}\ncpu_weight = 10\n"
    host = start_host(tmp_path / "state", config)
    try:
        assert mechanisms(host)["pids"] == "cgroup v1 pids"  # else the bomb takes the machine
        terminal = shell(host)
        group = PIDS_ROOT / f"ether-{host.process.pid}" / terminal.id
        assert (group / "pids.max").read_text().strip() == str(PIDS)
        marker = f"ether-bomb-{os.getpid()}-{time.monotonic_ns()}"  # $0 of every bomb shell
        try:
            write(host, terminal.id, f"bash -c ':(){{ :|:& }};:' {marker}\n")
            deadline = time.monotonic() + BUDGET
            while refused_forks(group) == 0:  # the kernel's count: no event to wait on
                assert time.monotonic() < deadline, "the bomb never reached its pids limit"
                time.sleep(0.05)
            assert len(marked(marker)) <= PIDS
            other = shell(host)
            write(host, other.id, "echo still-$((40 + 2))\n")
            wait_screen(host, other.id, "still-42", timeout=BUDGET)
            close(host, other.id)
        finally:
            close(host, terminal.id)
            deadline = time.monotonic() + BUDGET
            while marked(marker) and time.monotonic() < deadline:
                time.sleep(0.05)  # /proc holds no event for strangers' processes
        assert marked(marker) == []
        assert not group.exists()
        said = host.wait_for_log(lambda r: r.get("event") == "a child ran into its limits")
        assert said["child"] == terminal.id
        assert said["limits"][0].startswith(f"pids limit {PIDS} reached"), said
    finally:
        host.stop()


def test_file_size_and_cpu_time_limits_hold_in_a_terminal(tmp_path: Path) -> None:
    """RLIMIT_FSIZE and RLIMIT_CPU from [limits.terminals]: a write past 1 MiB and a loop past
    one second of CPU are ended by the kernel, and the shell says why."""
    config = CONFIG + '[limits.terminals]\nfile_size = "1MiB"\ncpu_time = 1\n'
    host = start_host(tmp_path / "state", config)
    try:
        terminal = shell(host)
        target = tmp_path / "big"
        write(host, terminal.id, f"head -c 3000000 /dev/zero > {target}; echo size-$((1 + 1))\n")
        wait_screen(host, terminal.id, "File size limit exceeded(.|\n)*size-2", timeout=BUDGET)
        assert target.stat().st_size == 1 << 20
        write(host, terminal.id, "bash -c 'while :; do :; done'; echo cpu-$((2 + 2))\n")
        wait_screen(host, terminal.id, "CPU time limit exceeded(.|\n)*cpu-4", timeout=BUDGET)
        close(host, terminal.id)
    finally:
        host.stop()


CPU_ROOT = Path("/sys/fs/cgroup/cpu")


@pytest.mark.skipif(not os.access(CPU_ROOT, os.W_OK), reason="no writable cgroup v1 cpu hierarchy")
def test_a_terminals_processes_share_one_cpu_group_of_the_hosts_weight_by_default(
    tmp_path: Path,
) -> None:
    """With no cpu_weight in the config, each terminal's program and what it starts are in one
    cpu group of the host's weight (cpu.shares 1024), so 100 terminals printing at once weigh
    on the scheduler as 100 processes, not as every process they run, and the host's event loop
    keeps its share (bench/RESULTS.md, "Terminals at scale"); closing the terminal removes the
    group."""
    host = start_host(tmp_path / "state")
    try:
        assert mechanisms(host)["cpu_weight"] == "cgroup v1 cpu"
        terminal = shell(host)
        group = CPU_ROOT / f"ether-{host.process.pid}" / terminal.id
        assert (group / "cpu.shares").read_text().strip() == "1024"
        write(host, terminal.id, "sleep 300 &\n")
        deadline = time.monotonic() + BUDGET
        while "sleep" not in {_command(pid) for pid in processes_of(terminal.id, pumps=False)}:
            assert time.monotonic() < deadline, "the shell never started sleep"
            time.sleep(0.05)  # /proc holds no event for a child's start
        programs = set(processes_of(terminal.id, pumps=False))
        members = {int(pid) for pid in (group / "cgroup.procs").read_text().split()}
        assert programs and programs <= members
        close(host, terminal.id)
        assert not group.exists()
    finally:
        host.stop()


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
