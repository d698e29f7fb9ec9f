"""Nothing an agent starts outlives a kill -9 of its host, however it detaches.

The host runs each agent replica in a PID namespace of its own (bubblewrap; containment.py):
when the host dies, bwrap's parent-death signal ends the namespace's init and the kernel kills
every process in the namespace. An agent here starts one `sleep` per way of leaving its
process group and session (setsid, nohup, setsid --fork, a subshell, a job of its own group,
a double-forked daemon), each known by its unique duration; after kill -9 of the host none may
remain. The same with util-linux's setpriv absent (the host's terminal pumps use it; this
guarantee must not). The terminal side is in tests/terminals/test_leaks.py.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from ether.v1 import supervisor_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, execute
from tests.support.host import HostProcess
from tests.support.procs import path_without, wait_gone

BUDGET = 30.0  # generous: a loaded 2-core machine; the kernel usually needs milliseconds

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (make terminal-tools)"
)


def sleeps(durations: list[int], within: float = 30.0) -> list[int]:
    """The pids of the `sleep <duration>` processes, once every one of them runs."""
    wanted = {f"sleep\0{seconds}\0".encode() for seconds in durations}
    deadline = time.monotonic() + within
    while True:
        found = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    command = Path(f"/proc/{name}/cmdline").read_bytes()
                except OSError:
                    continue
                if command in wanted:
                    found[command] = int(name)
        if len(found) == len(wanted) or time.monotonic() > deadline:
            assert len(found) == len(wanted), (sorted(found), sorted(wanted))
            return sorted(found.values())
        time.sleep(0.05)  # polling /proc: a detached process sends no event


@pytest.mark.parametrize("setpriv", [True, False], ids=["with-setpriv", "without-setpriv"])
def test_kill_minus_nine_of_the_host_ends_everything_an_agent_detached(
    tmp_path: Path, setpriv: bool
) -> None:
    """setsid, nohup, setsid --fork, (sleep &), a job in its own group and a double-forked
    daemon of an agent are all gone within the budget after kill -9 of the host."""
    env = {} if setpriv else {"PATH": path_without(tmp_path / "bin", "setpriv")}
    host = HostProcess(tmp_path / "state", env=env)
    host.wait_serving()
    deploy(host, AGENTS / "detacher")
    request = supervisor_pb2.ListProcessesRequest(agent="detacher")
    agent = host.supervisor.ListProcesses(request, timeout=10).processes[0].pid
    base = 410_000 + (os.getpid() % 1000) * 20 + (0 if setpriv else 10)  # unique per run
    durations = data(execute(host, "detacher", "detach", {"base": base}))["durations"]
    detached = sleeps([int(seconds) for seconds in durations.values()])
    assert len(detached) == 6
    host.process.kill()
    host.process.wait()
    assert wait_gone([agent, *detached], within=BUDGET) == []


def test_a_host_without_bubblewrap_says_so_once_at_start(tmp_path: Path) -> None:
    """Where bwrap is missing, the host warns once at start that detached processes can
    outlive it, and runs agents as before (subreaper and sweeper)."""
    host = HostProcess(tmp_path / "state", env={"PATH": path_without(tmp_path / "bin", "bwrap")})
    try:
        host.wait_serving()
        deploy(host, AGENTS / "detacher")
        warnings = [
            r for r in host.records if r.get("event", "").startswith("children run without PID")
        ]
        assert len(warnings) == 1 and "not installed" in warnings[0]["reason"]
    finally:
        host.stop()
