"""Claims of docs/agents.md that no other test held, each as a user sees it: a real host, the
rogue, lifecycle and worker test agents as real processes, and gRPC clients. The restart
policy's counters (the backoff reset, FATAL's counters reset by StartAgent), where an
out-of-range setting came from, a task for a stopped agent, a retry with no replica to run it,
and how an exit by signal reads in WatchEvents."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, agent_pids, deploy, events_until, remove_agent, state_name
from tests.support.calls import agent_input, budget, data, details, execute
from tests.support.host import HostProcess

ROGUE = AGENTS / "rogue"


def rogue_folder(folder: Path, settings: str) -> Path:
    """A copy of the rogue agent in ``folder``, with ``settings`` (agent.toml lines)."""
    folder.mkdir(parents=True)
    shutil.copy(ROGUE / "rogue.py", folder / "rogue.py")
    (folder / "agent.toml").write_text(
        'language = "python"\ncommand = ["python3", "rogue.py"]\n' + settings
    )
    return folder


def is_state(*states: str) -> Any:
    return lambda event: state_name(event.state) in states


def test_the_backoff_resets_after_reset_after_up(host: HostProcess, tmp_path: Path) -> None:
    """`backoff_base, backoff_cap`: "restart delay min(cap, base·2^(n-1)) ±20 %";
    `reset_after`: "the backoff resets after this long up". A process up longer than
    reset_after each time it dies is restarted after backoff_base every time, never doubled."""
    folder = rogue_folder(
        tmp_path / "steady",
        "backoff_base = 0.2\nbackoff_cap = 5\nstable_after = 0.01\nreset_after = 0.01\n"
        'max_restarts = 100\n[env]\nROGUE_EXIT_AFTER_WELCOME = "3"\n',
    )
    host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(spec=supervisor_pb2.AgentSpec(path=str(folder))),
        timeout=30,
    )
    try:
        # The name is new to this host: every event from the first.
        backoffs_seen: list[int] = []

        def third_backoff(event: supervisor_pb2.WatchEventsResponse) -> bool:
            if state_name(event.state) == "BACKOFF":
                backoffs_seen.append(event.sequence)
            return len(backoffs_seen) == 3

        seen = events_until(host, "steady", after=0, last=third_backoff)
        backoffs = [e.reason for e in seen if state_name(e.state) == "BACKOFF"]
        # 0.2 s ±20 % is written "0.2s"; without the reset the 2nd and 3rd would read 0.3-0.5
        # and 0.6-1.0 (tests/agents/test_policies.py holds the doubling).
        assert all(r.endswith("restarting in 0.2s") for r in backoffs), backoffs
        assert "FATAL" not in {state_name(e.state) for e in seen}
    finally:
        remove_agent(host, "steady")


def test_start_agent_after_fatal_resets_the_counters(host: HostProcess) -> None:
    """ "FATAL ... is sticky until StartAgent/RestartAgent, which reset the counters": an agent
    that went FATAL after start_retries failed starts gets the same retries again after
    StartAgent (a BACKOFF, then FATAL "failed to start 2 times"), not FATAL at its first death."""
    name = "recounted"
    host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name=name, path=str(AGENTS / "lifecycle"), env={"ROGUE_EXIT": "1"}, start_retries=1
            )
        ),
        timeout=30,
    )
    try:
        first = events_until(host, name, after=0, last=is_state("FATAL"))
        assert [state_name(e.state) for e in first].count("BACKOFF") == 1
        assert first[-1].reason.startswith("failed to start 2 times"), first[-1].reason
        host.supervisor.StartAgent(supervisor_pb2.StartAgentRequest(name=name), timeout=30)
        # Every event since that FATAL is StartAgent's doing.
        again = events_until(host, name, after=first[-1].sequence, last=is_state("FATAL"))
        states = [state_name(e.state) for e in again]
        assert states.count("BACKOFF") == 1, states
        assert again[-1].reason.startswith("failed to start 2 times"), again[-1].reason
    finally:
        remove_agent(host, name)


@pytest.mark.parametrize(
    ("toml", "spec", "field", "words"),
    [
        ("cancel_grace = 0\n", {}, "agent.toml cancel_grace", "is out of range 0.01..600"),
        ("max_frame = 268435457\n", {}, "agent.toml max_frame", "out of range"),
        ("", {"replicas": 65}, "spec.replicas", "out of range 1..64"),
        ("replicas = 0\n", {}, "agent.toml replicas", "out of range 1..64"),
        ("", {"name": "9lives"}, "spec.name", "must be 1-64 characters"),
        ('name = "has space"\n', {}, "agent.toml name", "must be 1-64 characters"),
        # A name given is used as written or refused, never folded ("Scout" is not "scout").
        ("", {"name": "Scout"}, "spec.name", "must be 1-64 characters"),
        ('name = "my.agent"\n', {}, "agent.toml name", "must be 1-64 characters"),
    ],
    ids=[
        "toml-cancel-grace",
        "toml-max-frame",
        "spec-replicas",
        "toml-replicas",
        "spec-name",
        "toml-name",
        "spec-name-upper-case",
        "toml-name-with-a-dot",
    ],
)
def test_a_value_out_of_range_names_where_it_came_from(
    host: HostProcess, tmp_path: Path, toml: str, spec: dict[str, Any], field: str, words: str
) -> None:
    """ "A value out of range is INVALID_ARGUMENT naming where it came from (`spec.cancel_grace`
    or `agent.toml cancel_grace`)" -- replicas 1..64, max_frame ≤ 256 MiB, names
    `[a-z][a-z0-9_-]{0,63}`; nothing is deployed."""
    # A folder (so a default name) of each case's own: one wrongly deployed spoils no other.
    default_name = field.replace(" ", "-").replace(".", "-")
    folder = rogue_folder(tmp_path / default_name, toml)
    request = supervisor_pb2.DeployAgentRequest(
        spec=supervisor_pb2.AgentSpec(path=str(folder), **spec)
    )
    with pytest.raises(grpc.RpcError) as refused:
        host.supervisor.DeployAgent(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value
    assert refused.value.details().startswith(f"{field}: "), refused.value.details()
    assert words in refused.value.details()
    violations = details(refused.value)["BadRequest"].field_violations
    assert [v.field for v in violations] == [field]
    with pytest.raises(grpc.RpcError) as unknown:
        host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=default_name), timeout=10)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_task_for_a_stopped_agent_names_the_state_and_how_to_start_it(
    host: HostProcess, tmp_path: Path
) -> None:
    """The table's "agent stopped or FATAL -> FAILED_PRECONDITION naming the state and how to
    start it", for STOPPED: refused at once (not queued until the deadline), and the same call
    runs once StartAgent brought it back."""
    name = deploy(host, rogue_folder(tmp_path / "paused", "stop_grace = 0.5\n"))
    try:
        host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name=name), timeout=60)
        with pytest.raises(grpc.RpcError) as refused:
            execute(host, name, "echo", {"n": 1}, timeout=30)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION, refused.value
        assert "STOPPED" in refused.value.details()
        assert "StartAgent" in refused.value.details()
        info = details(refused.value)["ErrorInfo"]
        assert info.reason == "AGENT_NOT_RUNNING" and info.metadata["state"] == "STOPPED"
        host.supervisor.StartAgent(supervisor_pb2.StartAgentRequest(name=name), timeout=60)
        # The answer does not wait for the process: a call queues until it runs.
        assert data(execute(host, name, "echo", {"n": 2}, timeout=60)) == {"n": 2}
    finally:
        remove_agent(host, name)


def test_a_retry_with_no_replica_running_waits_and_ends_deadline_exceeded(
    host: HostProcess,
) -> None:
    """Retries: "Each retry goes to a replica that is running and taking tasks; when there is
    none it waits for a restarted one, within the task's deadline (`DEADLINE_EXCEEDED` if none
    runs in time)". One replica, restarted only ~30 s after it dies; an idempotent task on it
    when it is killed ends DEADLINE_EXCEEDED at its 3 s budget, not UNAVAILABLE AGENT_DIED."""
    name = deploy(
        host,
        AGENTS / "worker",
        name="stranded",
        backoff_base=duration_pb2.Duration(seconds=30),
        stop_grace=duration_pb2.Duration(nanos=500_000_000),
    )
    try:
        request = agent_io_pb2.ExecuteStreamRequest(
            input=agent_input(
                name,
                "nap",
                {"ms": 20000},
                idempotent=True,
                context=agent_io_pb2.TaskContext(budget=budget(max_time=3)),
            )
        )
        stream = host.agents.ExecuteStream(request, timeout=60)
        first = next(stream)
        assert first.WhichOneof("event") == "started" and first.started.attempt == 1
        os.kill(first.started.pid, signal.SIGKILL)
        with pytest.raises(grpc.RpcError) as ended:
            list(stream)
        assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, ended.value.details()
        # The replica is still waiting out its backoff: nothing ran the retry.
        states = {
            state_name(p.state)
            for p in host.supervisor.ListProcesses(
                supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
            ).processes
        }
        assert states == {"BACKOFF"}, states
    finally:
        remove_agent(host, name)


@pytest.mark.parametrize("how", ["kill-9", "exit-137"])
def test_a_death_by_signal_reads_as_the_signal(host: HostProcess, tmp_path: Path, how: str) -> None:
    """ "Every change is a WatchEvents event with its reason, exit code or signal, and the last
    stderr lines"; "An exit code above 128 reads as the signal it names (128+N is how bwrap
    reports a death by signal N), as in a shell". A replica killed with SIGKILL, and one that
    exits 137 itself, both end with signal 9 and "killed by SIGKILL", no exit code."""
    env = {"ROGUE_EXIT_AFTER_WELCOME": "137"} if how == "exit-137" else {}
    settings = 'restart = "never"\n' + "".join(f'[env]\n{k} = "{v}"\n' for k, v in env.items())
    folder = rogue_folder(tmp_path / f"signalled-{how}", settings)
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(spec=supervisor_pb2.AgentSpec(path=str(folder))),
        timeout=30,
    )
    name = response.agent.info.name
    try:
        if how == "kill-9":
            running = events_until(host, name, after=0, last=is_state("RUNNING"))[-1]
            # Lines on stderr just before the death: the event carries them.
            assert data(execute(host, name, "stderr")) == {"written": True}
            assert agent_pids(host, name) == [running.pid]
            os.kill(running.pid, signal.SIGKILL)
        ended = events_until(host, name, after=0, last=is_state("EXITED", "FATAL"))[-1]
        assert state_name(ended.state) == "EXITED", ended.reason
        assert ended.HasField("signal") and ended.signal == signal.SIGKILL, ended
        assert not ended.HasField("exit_code"), ended
        assert ended.reason.startswith("killed by SIGKILL"), ended.reason
        if how == "kill-9":
            assert "back to normal" in ended.stderr_tail, list(ended.stderr_tail)
    finally:
        remove_agent(host, name)
