"""`ether agents ...` and `ether call` as a user runs them against a real host: what they print,
where (results on stdout, progress and events on stderr), and the exit status."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, EXAMPLES, deploy
from tests.support.host import ETHER, ROOT, HostProcess


def ether(
    host: HostProcess, *args: str, stdin: str = "", timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ETHER), *args, "--address", host.address],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def worker(host: HostProcess) -> str:
    """The worker test agent, deployed once for the module's tests that call it."""
    return deploy(host, AGENTS / "worker")


def _processes(host: HostProcess, name: str) -> list[supervisor_pb2.ProcessInfo]:
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
    )
    return list(listed.processes)


def test_deploy_waits_until_it_runs_then_list_ps_and_call_show_it(host: HostProcess) -> None:
    """deploy prints the agent's name once every replica runs (its lifecycle on stderr); list
    and ps show it running; call prints the result's data as JSON and exits 0."""
    deployed = ether(
        host, "agents", "deploy", str(AGENTS / "worker"), "--name", "twin", "--replicas", "2"
    )
    assert deployed.returncode == 0, deployed.stderr
    assert deployed.stdout == "twin\n"
    assert "twin[1]: RUNNING" in deployed.stderr
    assert [p.state for p in _processes(host, "twin")] == [agent_io_pb2.AGENT_STATE_RUNNING] * 2

    listed = ether(host, "agents", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:4] == ["NAME", "LANGUAGE", "STATE", "READY"]
    row = next(line.split() for line in lines if line.startswith("twin "))
    assert row[:4] == ["twin", "PYTHON", "RUNNING", "2/2"]
    assert "echo," in row and "nap," in row

    ps = ether(host, "agents", "ps", "twin").stdout.splitlines()
    pids = {str(p.pid) for p in _processes(host, "twin")}
    assert {line.split()[2] for line in ps[1:]} == pids
    assert all(line.split()[3] == "RUNNING" for line in ps[1:])

    called = ether(host, "call", "twin", "add", '{"a": 2, "b": 40}')
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {"sum": 42}
    piped = ether(host, "call", "twin", "echo", "-", stdin='{"from": "stdin"}')
    assert json.loads(piped.stdout) == {"from": "stdin"}


def test_list_ps_and_logs_print_json_for_scripts(host: HostProcess, worker: str) -> None:
    """-o json: list and ps print a JSON array with one object per agent or replica, every field
    present (0s included); logs prints one JSON object per line."""
    listed = ether(host, "agents", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    agents = json.loads(listed.stdout)
    assert isinstance(agents, list)
    mine = next(a for a in agents if a["name"] == worker)
    assert mine["state"] == "AGENT_STATE_RUNNING" and mine["inFlight"] == 0
    assert "add" in {action["name"] for action in mine["actions"]}

    ps = ether(host, "agents", "ps", worker, "--output", "json")
    assert ps.returncode == 0, ps.stderr
    replicas = json.loads(ps.stdout)
    assert [r["pid"] for r in replicas] == [p.pid for p in _processes(host, worker)]
    assert all(r["agent"] == worker and r["restarts"] == 0 for r in replicas)

    assert ether(host, "call", worker, "nap", '{"ms": 5}').returncode == 0
    logs = ether(host, "agents", "logs", worker, "-n", "50", "-o", "json")
    assert logs.returncode == 0, logs.stderr
    lines = [json.loads(line) for line in logs.stdout.splitlines()]
    assert lines and all(line["agent"] == worker for line in lines)
    assert any("napping" in line["message"] for line in lines), logs.stdout


def test_call_exit_status_follows_the_task_and_the_request(host: HostProcess, worker: str) -> None:
    """ERROR exits 1 with the agent's code and message; PARTIAL (over budget) exits 3 with the
    data still printed; a request the host refuses exits 2 with its reason and the field."""
    broken = ether(host, "call", "worker", "broken", '{"message": "no disk"}')
    assert broken.returncode == 1
    assert "broken: no disk" in broken.stderr

    partial = ether(host, "call", "worker", "costly", '{"cost": 2.5}', "--max-cost", "1")
    assert partial.returncode == 3, partial.stderr
    assert json.loads(partial.stdout) == {"charged": 2.5}
    assert "budget_exceeded" in partial.stderr

    unknown = ether(host, "call", "worker", "nope")
    assert unknown.returncode == 2
    assert "INVALID_ARGUMENT" in unknown.stderr and "echo" in unknown.stderr
    mistyped = ether(host, "call", "worker", "add", '{"a": "two", "b": 1}')
    assert mistyped.returncode == 2
    assert "input.params.a" in mistyped.stderr
    not_json = ether(host, "call", "worker", "add", "{a: 1}")
    assert not_json.returncode == 2 and "not JSON" in not_json.stderr
    missing = ether(host, "call", "nobody", "echo")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr


def test_call_stream_shows_progress_and_logs_on_stderr(host: HostProcess, worker: str) -> None:
    """--stream prints the task's progress and log events on stderr as they come; --full
    prints the whole AgentOutput (status, metadata) instead of the data alone."""
    streamed = ether(host, "call", "worker", "nap", '{"ms": 30}', "--stream", "--full")
    assert streamed.returncode == 0, streamed.stderr
    assert "progress 1/10 napping" in streamed.stderr
    assert "info napping" in streamed.stderr
    output = json.loads(streamed.stdout)
    assert output["status"] == "TASK_STATUS_SUCCESS"
    assert output["metadata"]["pid"] > 0


def test_scale_stop_start_and_remove(host: HostProcess) -> None:
    """scale waits until the new replicas run; stop ends every process; start waits until the
    agent runs again; remove forgets it."""
    assert ether(host, "agents", "deploy", str(EXAMPLES / "scout")).returncode == 0
    scaled = ether(host, "agents", "scale", "scout", "3")
    assert scaled.returncode == 0, scaled.stderr
    assert len(_processes(host, "scout")) == 3
    assert {p.state for p in _processes(host, "scout")} == {agent_io_pb2.AGENT_STATE_RUNNING}

    stopped = ether(host, "agents", "stop", "scout")
    assert stopped.returncode == 0
    assert stopped.stdout == "scout: STOPPED, 0/3 ready\n"
    assert {p.pid for p in _processes(host, "scout")} == {0}

    started = ether(host, "agents", "start", "scout")
    assert started.returncode == 0, started.stderr
    assert all(p.pid for p in _processes(host, "scout"))

    assert ether(host, "agents", "remove", "scout").stdout == "scout: removed\n"
    gone = ether(host, "agents", "show", "scout")
    assert gone.returncode == 1 and "NOT_FOUND" in gone.stderr


def test_scale_down_then_up_returns_once_exactly_those_replicas_run(host: HostProcess) -> None:
    """scale 2, 1, 2, 3, 1: each returns (exit 0, the name on stdout) once the agent runs exactly
    that many replicas, and ps lists exactly those, all RUNNING (none scaled away left over)."""
    name = deploy(host, AGENTS / "worker", name="scaled")
    try:
        for replicas in (2, 1, 2, 3, 1):
            scaled = ether(host, "agents", "scale", name, str(replicas), timeout=120)
            assert scaled.returncode == 0, scaled.stderr
            assert scaled.stdout == f"{name}\n"
            processes = _processes(host, name)
            assert [p.replica for p in processes] == list(range(replicas))
            assert {p.state for p in processes} == {agent_io_pb2.AGENT_STATE_RUNNING}
            listed = ether(host, "agents", "ps", name)
            rows = [line.split() for line in listed.stdout.splitlines()[1:]]
            assert [(row[1], row[3]) for row in rows] == [
                (str(i), "RUNNING") for i in range(replicas)
            ]
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=60)


def test_a_wait_that_runs_out_exits_1_saying_how_many_replicas_run(host: HostProcess) -> None:
    """An agent still starting when --wait-timeout runs out: exit 1 with how many replicas run,
    not the exit 4 of a host that cannot be reached."""
    deployed = ether(
        host,
        "agents",
        "deploy",
        str(AGENTS / "rogue"),
        "--name",
        "mute",
        "--env",
        "ROGUE_NO_HELLO=1",
        "--wait-timeout",
        "1",
    )
    try:
        assert deployed.returncode == 1, deployed.stderr
        assert "mute: 0 of 1 replicas running after 1s" in deployed.stderr
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name="mute"), timeout=60)


def test_a_deploy_that_cannot_run_exits_1_with_the_reason(
    host: HostProcess, tmp_path: Path
) -> None:
    """An agent that dies while loading is FATAL: deploy exits 1 and shows why, with the last
    stderr lines; a folder that does not exist is refused (exit 2) naming the field."""
    folder = tmp_path / "dies"
    folder.mkdir()
    (folder / "agent.py").write_text("raise SystemExit('no config file found')\n")
    (folder / "agent.toml").write_text('restart = "never"\n')
    failed = ether(host, "agents", "deploy", str(folder))
    assert failed.returncode == 1
    assert "dies[0]: FATAL" in failed.stderr or "dies[0]: EXITED" in failed.stderr
    assert "no config file found" in failed.stderr
    assert failed.stdout == ""

    nowhere = ether(host, "agents", "deploy", str(tmp_path / "nowhere"))
    assert nowhere.returncode == 2
    assert "spec.path" in nowhere.stderr


def test_logs_print_an_agents_lines_and_an_unreachable_host_exits_4(
    host: HostProcess, worker: str
) -> None:
    """logs prints the agent's log lines (here its structured log frames); any command against
    an address nobody serves exits 4."""
    assert ether(host, "call", "worker", "nap", '{"ms": 5}').returncode == 0
    logs = ether(host, "agents", "logs", "worker", "-n", "50")
    assert logs.returncode == 0, logs.stderr
    assert any("napping" in line for line in logs.stdout.splitlines()), logs.stdout

    unreachable = subprocess.run(
        [str(ETHER), "agents", "list", "--address", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unreachable.returncode == 4
    assert "UNAVAILABLE" in unreachable.stderr
