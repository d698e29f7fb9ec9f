"""The agents' total memory ([limits] total_memory, memory_total.py): one cap on every agent
replica and terminal together, held by the kernel on the host's ``ether-<pid>`` memory group,
which holds every child's group but not the host itself.

Two copies of tests/agents/hog, each well under its own 512 MiB, together pass a total of
600 MiB: the kernel kills the larger one inside the agents' tree, the task it was running fails
naming the total, WatchEvents says so, the replica restarts, and the host (same process) answers
another agent meanwhile. The bad-config tests need no cgroups.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import supervisor_pb2
from tests.host._support import run_ether
from tests.support.agents import AGENTS, deploy, reasons_until_restarted
from tests.support.calls import data, execute
from tests.support.host import HostProcess
from tests.support.resources import mechanisms

BUDGET = 60.0  # seconds for the kernel and the host to act, on a loaded 2-core machine
MEMORY_ROOT = Path("/sys/fs/cgroup/memory")
TOTAL = "agents' total memory limit 600 MiB exceeded"

needs_memory_cgroups = pytest.mark.skipif(
    not os.access(MEMORY_ROOT, os.W_OK),
    reason="no writable cgroup v1 memory hierarchy: the host can enforce no total here",
)


def hog(tmp_path: Path, name: str) -> Path:
    """A copy of the hog agent named ``name``, under the host's per-replica limits."""
    folder = tmp_path / name
    shutil.copytree(AGENTS / "hog", folder, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = folder / "agent.toml"
    manifest.write_text(manifest.read_text().replace('name = "hog"', f'name = "{name}"'))
    return folder


@pytest.fixture
def host(tmp_path: Path) -> Iterator[HostProcess]:
    """A host whose agents get 512 MiB each and 600 MiB all together."""
    config = tmp_path / "ether.toml"
    config.write_text('[limits]\ntotal_memory = "600MiB"\n[limits.agents]\nmemory = "512MiB"\n')
    process = HostProcess(tmp_path / "state", "--config", str(config))
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


@needs_memory_cgroups
def test_agents_together_past_the_total_lose_one_and_the_host_stays(
    host: HostProcess, tmp_path: Path
) -> None:
    """keeper holds 200 MiB, then grabber allocates 400 MiB: each is under its 512 MiB, together
    they pass 600 MiB. The kernel kills the largest process of the agents' tree (grabber, mid
    task): the task fails UNAVAILABLE naming the total, WatchEvents says "agents' total memory
    limit 600 MiB exceeded", grabber restarts and serves, another agent answers meanwhile, and
    the host is the same process as before, outside the group that was full."""
    found = mechanisms(host)["total_memory"]
    assert found.startswith("cgroup v1 memory, 600 MiB for all agents and terminals"), found
    info = host.supervisor.GetHostInfo(supervisor_pb2.GetHostInfoRequest(), timeout=10)
    assert info.host.isolation.limits["total_memory"] == found
    host_groups = Path(f"/proc/{host.process.pid}/cgroup").read_text()
    assert f"ether-{host.process.pid}" not in host_groups  # the host is not under the total

    keeper = deploy(host, hog(tmp_path, "keeper"))
    grabber = deploy(host, hog(tmp_path, "grabber"))
    bystander = deploy(host, AGENTS / "worker", name="bystander")
    assert data(execute(host, keeper, "hold", {"mib": 200}))["held_mib"] == 200

    with pytest.raises(grpc.RpcError) as died:
        execute(host, grabber, "allocate", {"mib": 400}, timeout=BUDGET)
    assert died.value.code() == grpc.StatusCode.UNAVAILABLE, died.value.details()
    assert "died while running task" in (died.value.details() or "")
    assert TOTAL in (died.value.details() or ""), died.value.details()
    assert data(execute(host, bystander, "echo", {"still": "here"})) == {"still": "here"}

    seen = reasons_until_restarted(host, grabber)
    assert any(reason.startswith(f"BACKOFF: {TOTAL} (killed by SIGKILL)") for reason in seen), seen
    assert not any("memory limit 512 MiB" in reason for reason in seen), seen
    assert data(execute(host, grabber, "allocate", {"mib": 16}))["held_mib"] == 16
    assert data(execute(host, keeper, "hold", {"mib": 1}))["held_mib"] == 201  # not the victim
    assert host.process.poll() is None


@pytest.mark.parametrize(
    ("toml", "said", "warning"),
    [
        pytest.param(
            '[limits]\ntotal_memory = "1GiB"\n',
            "cgroup v1 memory, 1 GiB for all agents and terminals together",
            None,
            marks=needs_memory_cgroups,
            id="equal-to-one-replica",
        ),
        pytest.param(
            '[limits]\ntotal_memory = "off"\n', "none: limits.total_memory is off", None, id="off"
        ),
        pytest.param(
            '[limits]\nmechanism = "rlimit"\ntotal_memory = "1GiB"\n',
            "none: limits.mechanism is rlimit (rlimits per child only, no total)",
            "limits.total_memory is not enforced",
            id="no-cgroups",
        ),
        pytest.param(
            '[limits]\ntotal_memory = "1000GiB"\n',
            "cgroup v1 memory, 1000 GiB for all agents and terminals together",
            "limits.total_memory leaves the host little room",
            marks=needs_memory_cgroups,
            id="above-the-default",
        ),
    ],
)
def test_the_host_says_what_holds_the_total(
    tmp_path: Path, toml: str, said: str, warning: str | None
) -> None:
    """The start log and GetHostInfo say the total and its mechanism, or "none" and why; a
    total the config asks for and the machine cannot hold, or one above 80 % of the machine,
    is a warning, and the host serves. A total equal to one replica's own limit (1 GiB by
    default) is accepted, though terminals may use 2 GiB each."""
    config = tmp_path / "ether.toml"
    config.write_text(toml)
    host = HostProcess(tmp_path / "state", "--config", str(config))
    try:
        host.wait_serving()
        found = mechanisms(host)["total_memory"]
        assert found.startswith(said), found
        info = host.supervisor.GetHostInfo(supervisor_pb2.GetHostInfoRequest(), timeout=10)
        assert info.host.isolation.limits["total_memory"] == found
        if warning is not None:
            record = host.wait_for_log(lambda r: str(r.get("event", "")).startswith(warning))
            assert record["level"] == "warning"
    finally:
        host.stop()


BAD_TOTALS = [
    # (id, TOML text, words the one line must hold)
    ("negative", "[limits]\ntotal_memory = -1\n", ["limits.total_memory", "negative"]),
    (
        "not-a-size",
        '[limits]\ntotal_memory = "most"\n',
        ["limits.total_memory", "'most'", "not a size", '"off"'],
    ),
    (
        "below-one-replica",
        '[limits]\ntotal_memory = "300MiB"\n[limits.agents]\nmemory = "512MiB"\n',
        ["limits.total_memory", "300 MiB", "limits.agents.memory = 512 MiB"],
    ),
    (
        "below-the-default-replica",
        '[limits]\ntotal_memory = "100MiB"\n',
        ["limits.total_memory", "100 MiB", "limits.agents.memory = 1 GiB"],
    ),
]


@pytest.mark.parametrize(
    ("toml", "words"), [b[1:] for b in BAD_TOTALS], ids=[b[0] for b in BAD_TOTALS]
)
def test_a_bad_total_stops_the_start_with_one_line(
    tmp_path: Path, toml: str, words: list[str]
) -> None:
    """A total that is negative, not a size, or less than one replica's own limit: exit 2 and
    one line naming limits.total_memory and the problem."""
    config = tmp_path / "ether.toml"
    config.write_text(toml)
    result = run_ether(
        "--config", str(config), "--listen", "127.0.0.1:0", "--state-dir",
        str(tmp_path / "state"), "--log-format", "json", timeout=BUDGET,
    )  # fmt: skip
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], f"{word!r} missing from: {lines[0]}"
