"""Resource limits of agent replicas (resources.py): memory, processes, open files.

The host config's [limits.agents] sets them; an agent's agent.toml [limits] may only lower
them. On this machine kind the cgroup v1 memory and pids controllers are writable, so each
replica runs in groups of its own; ``limits.mechanism = "rlimit"`` forces the fallback, so both
paths are tested here. The agent that runs into its limits is tests/agents/hog, copied per test
with the [limits] the test needs; the memory and fork-bomb tests also run the Go and TypeScript
probers (tests/agents/go_prober, ts_prober), whose own agent.toml sets their limits. The fork
bomb runs only once the host says a pids cgroup holds it: without one it would take the machine.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, reasons_until_restarted
from tests.support.calls import data, details, execute
from tests.support.host import HostProcess
from tests.support.resources import PIDS_ROOT, marked, mechanisms, refused_forks

BUDGET = 60.0  # seconds for the kernel and the host to act, on a loaded 2-core machine
MEMORY_ROOT = Path("/sys/fs/cgroup/memory")


@dataclass(frozen=True)
class Hog:
    """One language's agent that runs into its limits: its folder (None: a copy of
    tests/agents/hog with the test's [limits]) and the memory limit its agent.toml sets."""

    folder: Path | None
    memory_mib: int


HOGS = {
    "python": Hog(None, 64),
    "go": Hog(AGENTS / "go_prober", 64),
    # Node itself holds some 50 MiB; the Buffers it allocates live outside V8's heap.
    "typescript": Hog(AGENTS / "ts_prober", 128),
}

pytestmark = pytest.mark.skipif(
    not os.access(PIDS_ROOT, os.W_OK), reason="no writable cgroup v1 pids hierarchy"
)


def default_total_mib(pid: int) -> int:
    """80 % of MemTotal or of the lowest memory cgroup limit above the host, in whole MiB."""
    meminfo = Path("/proc/meminfo").read_text().split("\n")
    room = [int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1]) << 10]
    own = next(
        line.split(":", 2)[2]
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        if "memory" in line.split(":")[1].split(",")
    )
    group = MEMORY_ROOT / own.lstrip("/")
    while group == MEMORY_ROOT or MEMORY_ROOT in group.parents:
        limit = int((group / "memory.limit_in_bytes").read_text())
        if limit < 1 << 62:
            room.append(limit)
        if group == MEMORY_ROOT:
            break
        group = group.parent
    return int(min(room) * 0.8) >> 20


def start(tmp_path: Path, config: str, name: str = "state") -> HostProcess:
    path = tmp_path / f"{name}.toml"
    path.write_text(config)
    host = HostProcess(tmp_path / name, "--config", str(path))
    host.wait_serving()
    return host


def hog(tmp_path: Path, limits: str, name: str = "hog") -> Path:
    """A copy of the hog agent whose agent.toml has ``limits`` as its [limits] table."""
    folder = tmp_path / name
    shutil.copytree(AGENTS / "hog", folder, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = folder / "agent.toml"
    manifest.write_text(
        manifest.read_text().replace('name = "hog"', f'name = "{name}"') + f"\n[limits]\n{limits}\n"
    )
    return folder


def deploy_hog(host: HostProcess, tmp_path: Path, language: str, limits: str, name: str) -> str:
    """Deploy ``language``'s hog as ``name``: Python's as a copy with ``limits``, the Go and
    TypeScript probers as they are (their agent.toml has the same limits)."""
    folder = HOGS[language].folder
    if folder is None:
        return deploy(host, hog(tmp_path, limits, name=name))
    return deploy(host, folder, name=name)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A host whose agents get at most 128 processes and 256 open files each (cgroups)."""
    process = start(
        tmp_path_factory.mktemp("limits"), "[limits.agents]\npids = 128\nopen_files = 256\n"
    )
    try:
        yield process
    finally:
        process.stop()


def test_the_host_says_what_enforces_each_limit(host: HostProcess) -> None:
    """At start the host logs the mechanism per resource: cgroups for memory, processes and
    CPU weight where it may write them (this machine kind), rlimits for the rest; and the
    agents' total memory, by default 80 % of the machine's memory (or of the host's own
    cgroup limit, when lower), on the host's own group."""
    total = default_total_mib(host.process.pid)
    assert mechanisms(host) == {
        "memory": "cgroup v1 memory",
        "total_memory": (
            f"cgroup v1 memory, {total} MiB for all agents and terminals together "
            f"(on ether-{host.process.pid})"
        ),
        "pids": "cgroup v1 pids",
        "open_files": "rlimit RLIMIT_NOFILE",
        "file_size": "rlimit RLIMIT_FSIZE",
        "cpu_time": "rlimit RLIMIT_CPU",
        "cpu_weight": "cgroup v1 cpu",
    }


@pytest.mark.parametrize("language", list(HOGS))
def test_an_agent_past_its_memory_limit_is_killed_says_so_and_restarts(
    host: HostProcess, tmp_path: Path, language: str
) -> None:
    """agent.toml lowers the host's 1 GiB to 64 MiB (128 for Node); holding twice that gets
    the replica OOM-killed in its memory cgroup, WatchEvents says "memory limit 64 MiB
    exceeded", the replica restarts per its policy and serves again."""
    limit = HOGS[language].memory_mib
    agent = deploy_hog(host, tmp_path, language, f'memory = "{limit}MiB"', f"hog-memory-{language}")
    assert data(execute(host, agent, "allocate", {"mib": 16}))["held_mib"] == 16
    with pytest.raises(grpc.RpcError) as died:
        execute(host, agent, "allocate", {"mib": 2 * limit}, timeout=BUDGET)
    assert died.value.code() == grpc.StatusCode.UNAVAILABLE
    assert f"memory limit {limit} MiB exceeded" in (died.value.details() or ""), died.value
    assert "total" not in (died.value.details() or ""), died.value
    seen = reasons_until_restarted(host, agent)
    assert any(
        reason.startswith(f"BACKOFF: memory limit {limit} MiB exceeded (killed by SIGKILL)")
        for reason in seen
    ), seen
    assert data(execute(host, agent, "allocate", {"mib": 16}))["held_mib"] == 16
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=agent), timeout=30)


def test_the_open_files_limit_holds_in_an_agent(host: HostProcess, tmp_path: Path) -> None:
    """The host's open_files = 256: the agent's opens past it fail, and it answers on."""
    agent = deploy(host, hog(tmp_path, "", name="opener"))
    opened = data(execute(host, agent, "open_files", {"count": 1000}))
    assert opened["opened"] < 256 and opened["error"] == "Too many open files", opened
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=agent), timeout=30)


@pytest.mark.parametrize("language", list(HOGS))
def test_a_fork_bomb_in_an_agent_is_contained(
    host: HostProcess, tmp_path: Path, language: str
) -> None:
    """A fork bomb under a pids limit of 32 (a shell one in Python; sleep children started
    without end by os/exec in Go, child_process.spawn in Node) fills its group and no more
    (forks fail); another agent's Execute answers within its deadline meanwhile, and once the
    agent is removed no process of the bomb is left."""
    assert mechanisms(host)["pids"] == "cgroup v1 pids"  # else the bomb would take the machine
    name = f"bomber-{language}"
    bomber = deploy_hog(host, tmp_path, language, "pids = 32\ncpu_weight = 10", name)
    worker = deploy(host, AGENTS / "worker", name=f"bystander-{language}")
    group = PIDS_ROOT / data(execute(host, bomber, "groups"))["pids"].lstrip("/")
    assert group.name.startswith(f"{name}-0-"), group

    marker = f"ether-bomb-{os.getpid()}-{time.monotonic_ns()}"
    try:
        execute(host, bomber, "bomb", {"marker": marker})
        deadline = time.monotonic() + BUDGET
        while refused_forks(group) == 0:  # the kernel's count: no event to wait on
            assert time.monotonic() < deadline, "the bomb never reached its pids limit"
            time.sleep(0.05)
        assert len(marked(marker)) <= 32
        answer = execute(host, worker, "echo", {"still": "here"}, timeout=30)
        assert data(answer) == {"still": "here"}
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=bomber), timeout=60)
        deadline = time.monotonic() + BUDGET
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)  # /proc holds no event for strangers' processes
    assert marked(marker) == []
    assert not group.exists()
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=worker), timeout=30)


@pytest.mark.parametrize(
    ("limits", "code", "words"),
    [
        (
            'memory = "2GiB"',
            grpc.StatusCode.FAILED_PRECONDITION,
            ["limits.memory", "2 GiB", "1 GiB", "limits.agents.memory"],
        ),
        ("pids = 0", grpc.StatusCode.FAILED_PRECONDITION, ["limits.pids", "unlimited", "128"]),
        ("open_files = 1000", grpc.StatusCode.FAILED_PRECONDITION, ["limits.open_files", "256"]),
        ('memory = "lots"', grpc.StatusCode.INVALID_ARGUMENT, ["limits.memory", "not a size"]),
        ("pids = -1", grpc.StatusCode.INVALID_ARGUMENT, ["limits.pids", "negative"]),
        ("threads = 4", grpc.StatusCode.INVALID_ARGUMENT, ["limits", "'threads'"]),
    ],
    ids=["memory-above", "pids-unlimited", "files-above", "not-a-size", "negative", "unknown"],
)
def test_agent_limits_may_only_lower_the_hosts(
    host: HostProcess, tmp_path: Path, limits: str, code: grpc.StatusCode, words: list[str]
) -> None:
    """agent.toml [limits] above the host's (or unlimited where the host has a limit) is
    refused FAILED_PRECONDITION naming the setting; a bad value INVALID_ARGUMENT naming it.
    Nothing is deployed."""
    with pytest.raises(grpc.RpcError) as refused:
        deploy(host, hog(tmp_path, limits, name="greedy"), wait=False)
    assert refused.value.code() == code
    for word in words:
        assert word in (refused.value.details() or ""), refused.value.details()
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        assert details(refused.value)["ErrorInfo"].reason == "LIMIT_ABOVE_HOST"
    listed = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=10)
    assert "greedy" not in [agent.name for agent in listed.agents]


def test_under_the_rlimit_fallback_limits_hold_inside_the_agent(tmp_path: Path) -> None:
    """With limits.mechanism = "rlimit" no cgroup is made: memory is RLIMIT_DATA (an
    allocation past it fails in the agent, which answers on), open files RLIMIT_NOFILE, and
    the host says that processes are not limited for root."""
    host = start(tmp_path, '[limits]\nmechanism = "rlimit"\n[limits.agents]\nopen_files = 64\n')
    try:
        found = mechanisms(host)
        assert found["memory"] == "rlimit RLIMIT_DATA"
        assert found["total_memory"] == (
            "none: limits.mechanism is rlimit (rlimits per child only, no total)"
        )
        assert found["pids"].startswith("none" if os.geteuid() == 0 else "rlimit RLIMIT_NPROC")
        agent = deploy(host, hog(tmp_path, 'memory = "64MiB"'))
        assert data(execute(host, agent, "groups"))["pids"] == "/"  # in no group of its own
        failed = execute(host, agent, "allocate", {"mib": 128})
        assert failed.status == agent_io_pb2.TASK_STATUS_ERROR
        assert "MemoryError" in failed.error.message, failed.error
        assert data(execute(host, agent, "allocate", {"mib": 8}))["held_mib"] == 8
        opened = data(execute(host, agent, "open_files", {"count": 1000}))
        assert opened["opened"] < 64 and opened["error"] == "Too many open files", opened
    finally:
        host.stop()


def test_the_groups_of_a_host_killed_with_minus_nine_go_at_the_next_start(
    tmp_path: Path,
) -> None:
    """A host killed with -9 leaves its control groups; the next host removes them at start.
    A host that stops normally removes its own."""
    first = start(tmp_path, "[limits.agents]\npids = 64\n", name="first")
    agent = deploy(first, hog(tmp_path, "pids = 32"))
    group = PIDS_ROOT / data(execute(first, agent, "groups"))["pids"].lstrip("/")
    base = group.parent
    assert base.name == f"ether-{first.process.pid}"
    first.process.kill()
    first.process.wait()
    assert base.exists()
    second = start(tmp_path, "[limits.agents]\npids = 64\n", name="second")
    try:
        second.wait_for_log(lambda r: r.get("event") == "resource limits")
        assert not base.exists()
        mine = PIDS_ROOT / f"ether-{second.process.pid}"
        assert mine.exists()
    finally:
        assert second.stop() == 0
    assert not mine.exists()
