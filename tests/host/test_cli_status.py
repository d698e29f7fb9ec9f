"""`ether status` and `ether top` against a real host: the numbers they print are the ones the
test made (replicas deployed, a replica stopped, a task held in flight, a crash restarted)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import agent_input
from tests.support.host import ETHER, ROOT, HostProcess


def ether(host: HostProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ETHER), *args, "--address", host.address],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )


@pytest.fixture(scope="module")
def busy_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A host with: 'pair', the worker with 2 replicas and one task napping on it; 'idle',
    stopped; 'bouncer', whose one replica crashed once and was restarted."""
    host = HostProcess(tmp_path_factory.mktemp("status-state"))
    held: grpc.Future | None = None
    try:
        host.wait_serving()
        deploy(host, AGENTS / "worker", name="pair", replicas=2)
        deploy(host, AGENTS / "worker", name="idle")
        host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name="idle"), timeout=30)
        deploy(host, AGENTS / "lifecycle", name="bouncer")
        crash = host.agents.Execute.future(
            agent_io_pb2.ExecuteRequest(input=agent_input("bouncer", "crash")), timeout=120
        )
        backoff = watch_until(host, "bouncer", {"BACKOFF"})
        watch_until(host, "bouncer", {"RUNNING"}, after=backoff.sequence)
        with pytest.raises(grpc.RpcError):
            crash.result()
        # A task in flight on 'pair' until the module ends: its first progress says it runs.
        held = host.agents.ExecuteStream(
            agent_io_pb2.ExecuteStreamRequest(input=agent_input("pair", "nap", {"ms": 3_600_000})),
            timeout=3600,
        )
        next(iter(held))
        yield host
    finally:
        if held is not None:
            held.cancel()
        host.stop()


def test_status_json_counts_what_was_deployed(busy_host: HostProcess) -> None:
    """-o json: the host's version and uptime, and per agent its state, replicas running of
    those asked for, the task in flight and the restart, as the test made them."""
    result = ether(busy_host, "status", "-o", "json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)

    info = busy_host.supervisor.GetHostInfo(supervisor_pb2.GetHostInfoRequest(), timeout=30).host
    assert status["host"]["version"] == info.version
    assert status["host"]["uptime_seconds"] >= 0
    agents = {agent["name"]: agent for agent in status["agents"]}
    assert set(agents) == {"pair", "idle", "bouncer"}
    assert agents["pair"] == {
        "name": "pair",
        "state": "RUNNING",
        "replicas": 2,
        "running": 2,
        "in_flight": 1,
        "queued": 0,
        "restarts": 0,
        # This host has no HTTP listener, so no /metrics: no task figures, and why.
        "tasks_ended": None,
        "p50_seconds": None,
        "p99_seconds": None,
    }
    assert "no HTTP listener" in status["metrics_unavailable"]
    assert agents["idle"]["state"] == "STOPPED"
    assert (agents["idle"]["replicas"], agents["idle"]["running"]) == (1, 0)
    assert agents["idle"]["in_flight"] == 0
    assert agents["bouncer"]["state"] == "RUNNING"
    assert agents["bouncer"]["restarts"] == 1
    assert (agents["bouncer"]["replicas"], agents["bouncer"]["running"]) == (1, 1)
    assert status["terminals_running"] == 0
    assert status["runs_active"] == 0


def test_status_table_shows_the_agents(busy_host: HostProcess) -> None:
    """The table for people: a host line, then a row per agent with RUNNING as n/m."""
    result = ether(busy_host, "status")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("host      ether ")
    assert "3 deployed, 2 with a replica running" in lines[1]
    rows = {line.split()[0]: line.split() for line in lines if line.split()[:1] == ["pair"]}
    assert rows["pair"][:4] == ["pair", "RUNNING", "2/2", "1"]
    assert rows["pair"][6:9] == ["-", "-", "-"]  # TASKS, P50, P99: no /metrics to read
    assert lines[-1].startswith("TASKS, P50, P99: - (the host has no HTTP listener")


def test_top_once_prints_the_agents(busy_host: HostProcess) -> None:
    """`ether top --once`: one refresh as a plain table, every agent with its state and load."""
    # Without metrics there is no interval to wait for: the table comes at once, not in an hour.
    result = ether(busy_host, "top", "--once", "--interval", "3600")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "3 agents, 2 running, 1 tasks in flight" in lines[0]
    assert lines[1].split()[:3] == ["NAME", "STATE", "RUNNING"]
    rows = {line.split()[0]: line.split() for line in lines[2:-1]}
    assert set(rows) == {"pair", "idle", "bouncer"}
    # TASKS/S, P50, P99 need the host's /metrics, and this host has no HTTP listener: "-",
    # and the line under the table says so.
    assert rows["pair"][6:9] == ["-", "-", "-"]
    assert lines[-1].startswith("TASKS/S, P50, P99: - (the host has no HTTP listener")
    assert rows["pair"][:4] == ["pair", "RUNNING", "2/2", "1"]
    assert rows["idle"][:3] == ["idle", "STOPPED", "0/1"]
    assert rows["bouncer"][5] == "1"  # RESTARTS


def test_status_reports_an_unreachable_host(tmp_path: Path) -> None:
    """No host at the address: a one-line UNAVAILABLE and exit 4, as every client command."""
    result = subprocess.run(
        [str(ETHER), "status", "--address", f"unix:{tmp_path / 'none.sock'}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 4, result.stdout + result.stderr
    assert "ether status: UNAVAILABLE" in result.stderr


def test_status_leaves_out_what_the_token_may_not_read(tmp_path: Path) -> None:
    """A token with agent.read only: the agents and the host are there, the terminal and run
    counts are null (not an error), and the exit status is 0."""
    tokens = tmp_path / "tokens"
    tokens.write_text("viewer viewer-token-0123456789ab agent.read\n")
    host = HostProcess(tmp_path / "state", "--auth-tokens-file", str(tokens))
    try:
        host.wait_serving()
        result = ether(host, "status", "-o", "json", "--token", "viewer-token-0123456789ab")
        assert result.returncode == 0, result.stderr
        status = json.loads(result.stdout)
        assert status["agents"] == [] and status["host"]["version"]
        assert status["terminals_running"] is None
        assert status["runs_active"] is None
    finally:
        assert host.stop() == 0
