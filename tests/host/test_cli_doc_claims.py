"""README's `ether` CLI claims that had no test of their own, run as a user runs them against a
real host: `agents deploy --restart`, `agents restart NAME`, `agents logs NAME -f`, and
`call --timeout` / `call --task-id` (README, "Calling agents")."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator

import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, agent_pids, deploy, state_name, watch_until
from tests.support.cli import Commands, Lines
from tests.support.host import ETHER, ROOT, HostProcess
from tests.support.procs import wait_gone


def ether(host: HostProcess, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ETHER), *args, "--address", host.address],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture
def cli() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Starts `ether ...` in the background against a host; none is left behind."""
    commands = Commands()
    yield lambda host, *args: commands.start(host.address, *args)
    commands.close()


@pytest.fixture(scope="module")
def worker(host: HostProcess) -> str:
    return deploy(host, AGENTS / "worker")


def test_deploy_restart_never_leaves_a_crashed_agent_exited(host: HostProcess) -> None:
    """`agents deploy --restart never` overrides the folder's agent.toml (rogue says on-failure):
    after its process crashes the agent is EXITED, in GetAgent, `agents list` and `agents ps`,
    instead of going through BACKOFF to a new process."""
    name = f"never-{uuid.uuid4().hex[:6]}"
    deployed = ether(
        host, "agents", "deploy", str(AGENTS / "rogue"), "--name", name, "--restart", "never"
    )
    try:
        assert deployed.returncode == 0, deployed.stderr
        assert deployed.stdout == f"{name}\n"
        # rogue's "crash" action is os._exit(3): an exit the host did not ask for. The host
        # answered the call (UNAVAILABLE, AGENT_DIED): exit 1, not 4 (no host answered).
        crashed = ether(host, "call", name, "crash")
        assert crashed.returncode == 1, crashed.stderr
        assert "UNAVAILABLE" in crashed.stderr and "died while running task" in crashed.stderr
        # The first state after RUNNING says what the policy decided (on-failure: BACKOFF).
        ended = watch_until(host, name, {"EXITED", "BACKOFF", "FATAL"})
        assert state_name(ended.state) == "EXITED", ended.reason
        assert ended.exit_code == 3
        got = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=name), timeout=30).agent
        assert state_name(got.state) == "EXITED"
        listed = ether(host, "agents", "list", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        mine = next(a for a in json.loads(listed.stdout) if a["name"] == name)
        assert mine["state"] == "AGENT_STATE_EXITED" and mine["readyReplicas"] == 0
        row = ether(host, "agents", "ps", name).stdout.splitlines()[1].split()
        assert row[2:4] == ["-", "EXITED"]  # PID, STATE: no process, none coming back
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=60)


def test_agents_restart_replaces_the_process_and_waits_until_it_runs(host: HostProcess) -> None:
    """`agents restart NAME` stops the agent's process and starts a new one: it exits 0 with the
    name once the new process runs; the old pid is gone and ps shows the new one RUNNING."""
    name = deploy(host, AGENTS / "worker", name=f"again-{uuid.uuid4().hex[:6]}")
    try:
        [before] = agent_pids(host, name)
        restarted = ether(host, "agents", "restart", name)
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout == f"{name}\n"
        [after] = agent_pids(host, name)
        assert after and after != before
        assert wait_gone([before], within=30) == []
        row = ether(host, "agents", "ps", name).stdout.splitlines()[1].split()
        assert row[2:4] == [str(after), "RUNNING"]
        got = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=name), timeout=30).agent
        assert state_name(got.state) == "RUNNING" and got.ready_replicas == 1
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=60)


def test_logs_follow_prints_a_line_logged_after_it_started(
    host: HostProcess, cli: Callable[..., subprocess.Popen[str]]
) -> None:
    """`agents logs NAME -f` prints the tail, then keeps going: a line the agent logs once the
    command is already printing shows up too. It runs until stopped (here: terminated)."""
    # An agent of its own, so the tail holds exactly one "napping" line: this one.
    name = deploy(host, AGENTS / "worker", name=f"tail-{uuid.uuid4().hex[:6]}")
    try:
        assert ether(host, "call", name, "nap", '{"ms": 5}').returncode == 0
        follower = cli(host, "agents", "logs", name, "-f")
        assert follower.stdout is not None
        lines = Lines(follower.stdout)
        lines.wait_for(lambda line: line.endswith(" napping"))  # the tail's line
        # The follower is printing, so this task's log line comes after the command started.
        assert ether(host, "call", name, "nap", '{"ms": 6}').returncode == 0
        lines.wait_for(lambda line: line.endswith(" napping"))
        assert follower.poll() is None  # still following
        follower.terminate()
        assert follower.wait(timeout=30) == -signal.SIGTERM
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=60)


def test_call_timeout_ends_deadline_exceeded_with_exit_1(host: HostProcess, worker: str) -> None:
    """`call --timeout 1` on a task that takes a minute: DEADLINE_EXCEEDED on stderr and exit 1
    (README: 1 for any other failed call; 4 is only for a host that cannot be reached)."""
    called = ether(host, "call", worker, "nap", '{"ms": 60000}', "--timeout", "1", timeout=110)
    assert called.returncode == 1, called.stdout + called.stderr
    assert "ether call: DEADLINE_EXCEEDED" in called.stderr
    assert called.stdout == ""


def test_call_task_id_is_the_tasks_id(
    host: HostProcess, worker: str, cli: Callable[..., subprocess.Popen[str]]
) -> None:
    """`call --task-id ID`: the task carries that id, in its output (--full) and while it runs,
    so CancelTask with that id ends the call (CANCELLED, exit 1)."""
    task_id = f"cli-{uuid.uuid4().hex[:8]}"
    full = ether(host, "call", worker, "echo", '{"x": 1}', "--task-id", task_id, "--full")
    assert full.returncode == 0, full.stderr
    assert json.loads(full.stdout)["taskId"] == task_id

    running_id = f"cli-{uuid.uuid4().hex[:8]}"
    napping = cli(
        host, "call", worker, "nap", '{"ms": 600000}', "--task-id", running_id, "--stream"
    )
    assert napping.stderr is not None
    lines = Lines(napping.stderr)
    lines.wait_for(lambda line: line.startswith("progress "))  # the agent is running it
    cancelled = host.agents.CancelTask(
        agent_io_pb2.CancelTaskRequest(task_id=running_id, reason="test"), timeout=30
    )
    assert cancelled.cancelled
    assert napping.wait(timeout=60) == 1
    lines.wait_for(lambda line: "CANCELLED" in line)
