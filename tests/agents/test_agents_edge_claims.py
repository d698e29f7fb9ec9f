"""Edge claims of docs/agents.md, docs/protocol.md, docs/limits.md and the Python SDK's README
that no other test held, each as a user sees it: a real host, real agent processes
(tests/agents/drainer, a Python SDK agent of this file's own; tests/agents/lifecycle, the rogue),
gRPC clients.

- docs/agents.md "States and restarts" (a stop sends `shutdown` and closes stdin, waits
  `stop_grace`, then SIGTERM) with docs/protocol.md rule 9 (`shutdown`: "finish or cancel
  in-flight tasks within the grace, write their results, exit 0") and the Python README
  ("`@agent.on_stop` runs once in-flight tasks are done"; "wait for in-flight ones up to the
  grace, cancel the rest"): a task in flight at StopAgent that ends within `stop_grace` is
  answered with its result; one that outlasts it is answered `cancelled` by the agent; either
  way on_stop runs after it and the process exits 0.
- docs/agents.md "Resource limits" and docs/limits.md's CPU time row: an agent past `cpu_time`
  is killed, the task on it fails UNAVAILABLE (`AGENT_DIED`), the exit reason says `CPU time
  limit N s exceeded`, and the replica restarts by its policy.
- docs/agents.md "Tasks": "A task that does not answer its cancel within `cancel_grace` gets its
  process restarted (other tasks of that process fail UNAVAILABLE)" -- the other tasks' side.
  (Before, the host sent the wedged process `shutdown` with grace 0 first, so an SDK agent
  answered them `cancelled`, "stop requested", and an idempotent one was not tried again.)
- docs/agents.md "An agent folder" (`max_restarts`, `restart_period`): only restarts *within*
  the period count, so deaths further apart than it never add up to FATAL; and "States and
  restarts": FATAL for too many restarts is sticky until StartAgent, which resets that count.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import (
    AGENTS,
    deploy,
    events_until,
    reasons_until_restarted,
    remove_agent,
    state_name,
)
from tests.support.calls import agent_input, data, details, execute
from tests.support.host import HostProcess

DRAINER = AGENTS / "drainer"
LIFECYCLE = AGENTS / "lifecycle"
BUDGET = 60.0  # seconds for the kernel and the host to act, on a loaded 2-core machine


def seconds(value: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromNanoseconds(int(value * 1e9))
    return duration


def stderr_lines(host: HostProcess, agent: str) -> list[str]:
    """What ``agent``'s processes wrote on stderr, in order (StreamLogs)."""
    request = supervisor_pb2.StreamLogsRequest(agent=agent, tail_lines=10000)
    return [
        line.message
        for line in host.supervisor.StreamLogs(request, timeout=30)
        if line.source == "stderr"
    ]


def start_work(
    host: HostProcess, agent: str, ms: int
) -> Iterator[agent_io_pb2.ExecuteStreamResponse]:
    """An ExecuteStream of `work` for ``ms``, returned once the agent runs it (its log line)."""
    stream = host.agents.ExecuteStream(
        agent_io_pb2.ExecuteStreamRequest(input=agent_input(agent, "work", {"ms": ms})),
        timeout=BUDGET + ms / 1000,
    )
    for event in stream:
        kind = event.WhichOneof("event")
        assert kind != "output", f"the task ended before the stop: {event}"
        if kind == "log":
            return stream
    raise AssertionError("the work task never started")


def stop_with_task_in_flight(
    host: HostProcess, agent: str, ms: int, ending: str
) -> agent_io_pb2.AgentOutput:
    """StopAgent while `work` for ``ms`` runs: the task's output, once the process has exited 0
    by itself (its STOPPED event: exit code 0, no signal) and the SDK's on_stop hook has run
    after the task ``ending`` (its stderr line `work <ms> <ending>`), seeing none running."""
    stream = start_work(host, agent, ms)
    stop = host.supervisor.StopAgent.future(
        supervisor_pb2.StopAgentRequest(name=agent), timeout=BUDGET + ms / 1000
    )
    events = list(stream)
    assert events and events[-1].WhichOneof("event") == "output", events
    assert state_name(stop.result().agent.info.state) == "STOPPED"
    stopped = events_until(
        host, agent, after=0, last=lambda e: e.replica == 0 and state_name(e.state) == "STOPPED"
    )[-1]
    assert stopped.HasField("exit_code") and stopped.exit_code == 0, stopped
    assert not stopped.HasField("signal"), stopped
    lines = stderr_lines(host, agent)
    hooks = [line for line in lines if line.startswith("on_stop")]
    assert hooks == ["on_stop: 0 work tasks running"], lines
    task_ended = f"work {ms} {ending}"
    assert task_ended in lines, lines
    assert lines.index(task_ended) < lines.index(hooks[0])
    return events[-1].output


def test_a_stop_lets_a_task_in_flight_finish_and_on_stop_runs_after_it(
    host: HostProcess,
) -> None:
    """StopAgent while a 2 s task runs on an agent with stop_grace 30 s: the caller gets the
    task's own SUCCESS result (the agent finished it within the grace), the SDK's on_stop hook
    runs after the task ended and sees none running, and the process exits 0 by itself (the
    STOPPED event: exit code 0, no signal)."""
    name = deploy(host, DRAINER, name="drain-finish", stop_grace=seconds(30))
    try:
        output = stop_with_task_in_flight(host, name, 2000, "finished")
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
        assert data(output) == {"worked": 2000}
    finally:
        remove_agent(host, name)


def test_a_task_outlasting_stop_grace_is_answered_cancelled_before_the_exit(
    host: HostProcess,
) -> None:
    """StopAgent while a 10-minute task runs on an agent with stop_grace 1 s: the agent cancels
    it at the grace and writes its result, which reaches the caller as the task's answer (an
    ERROR output with code `cancelled`, not UNAVAILABLE for a process gone); on_stop runs after
    the cancelled task, and the process exits 0."""
    name = deploy(host, DRAINER, name="drain-cancel", stop_grace=seconds(1))
    try:
        output = stop_with_task_in_flight(host, name, 600_000, "cancelled")
        assert output.status == agent_io_pb2.TASK_STATUS_ERROR, output
        assert output.error.code == "cancelled", output.error
        assert "shutting down" in output.error.message, output.error
    finally:
        remove_agent(host, name)


def test_an_agent_past_its_cpu_time_is_killed_and_the_reason_names_the_limit(
    host: HostProcess, tmp_path: Path
) -> None:
    """`cpu_time = 2` (agent.toml `[limits]` lowering the host's unlimited): a task burning CPU for
    up to 10 minutes ends when the kernel ends the process (SIGXCPU at the limit): the caller
    gets UNAVAILABLE, AGENT_DIED, the replica's exit reason in WatchEvents says `CPU time limit
    2 s exceeded`, and the replica restarts by its policy and answers again."""
    folder = tmp_path / "drainer"
    shutil.copytree(DRAINER, folder, ignore=shutil.ignore_patterns("__pycache__"))
    with (folder / "agent.toml").open("a") as manifest:
        manifest.write("\n[limits]\ncpu_time = 2\n")
    name = deploy(host, folder, name="drain-cpu")
    try:
        with pytest.raises(grpc.RpcError) as died:
            execute(host, name, "spin", {"seconds": 600}, timeout=BUDGET)
        assert died.value.code() == grpc.StatusCode.UNAVAILABLE, died.value
        assert details(died.value)["ErrorInfo"].reason == "AGENT_DIED", died.value
        seen = reasons_until_restarted(host, name)
        assert any(
            reason.startswith("BACKOFF") and "CPU time limit 2 s exceeded" in reason
            for reason in seen
        ), seen
        assert data(execute(host, name, "work", {"ms": 1})) == {"worked": 1}
    finally:
        remove_agent(host, name)


def test_the_other_tasks_of_a_process_restarted_for_an_unanswered_cancel_fail_unavailable(
    host: HostProcess,
) -> None:
    """One replica runs a long `work` task and a `deaf` one that ignores its cancel: the deaf
    task's deadline passes (DEADLINE_EXCEEDED), cancel_grace (0.5 s) later its process is
    restarted, and the other task, which was running fine on it, fails UNAVAILABLE
    (AGENT_DIED) -- it is not idempotent, so not tried again."""
    name = deploy(host, DRAINER, name="drain-deaf", cancel_grace=seconds(0.5))
    try:
        bystander = start_work(host, name, 600_000)
        with pytest.raises(grpc.RpcError) as late:
            execute(host, name, "deaf", {}, timeout=1)
        assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, late.value
        with pytest.raises(grpc.RpcError) as failed:
            for event in bystander:
                assert event.WhichOneof("event") != "output", event
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE, failed.value
        assert details(failed.value)["ErrorInfo"].reason == "AGENT_DIED", failed.value
    finally:
        remove_agent(host, name)


def test_deaths_further_apart_than_restart_period_never_add_up_to_fatal(
    host: HostProcess,
) -> None:
    """`max_restarts = 1` in `restart_period = 1 s`, with every restart delayed 1.2-1.8 s (a
    backoff of 1.5 s, capped there): each death finds no other in its period, so the replica
    is restarted again and again (four BACKOFFs) instead of going FATAL at its second death."""
    name = "far-apart"
    host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name=name,
                path=str(LIFECYCLE),
                env={"ROGUE_EXIT_AFTER_WELCOME": "3"},
                max_restarts=1,
                restart_period=seconds(1),
                backoff_base=seconds(1.5),
                backoff_cap=seconds(1.5),
                stable_after=seconds(0.01),
            )
        ),
        timeout=30,
    )
    try:
        backoffs: list[str] = []

        def fourth_backoff_or_fatal(event: supervisor_pb2.WatchEventsResponse) -> bool:
            if state_name(event.state) == "BACKOFF":
                backoffs.append(event.reason)
            return len(backoffs) == 4 or state_name(event.state) == "FATAL"

        seen = events_until(host, name, after=0, last=fourth_backoff_or_fatal)
        assert "FATAL" not in {state_name(e.state) for e in seen}, [e.reason for e in seen]
        assert len(backoffs) == 4, backoffs
    finally:
        remove_agent(host, name)


def test_start_agent_after_too_many_restarts_gives_the_restarts_again(
    host: HostProcess,
) -> None:
    """`max_restarts = 1` in 300 s: the second death is FATAL ("too many restarts: 2 in 300s").
    It is sticky -- a task is refused FAILED_PRECONDITION naming FATAL -- until StartAgent,
    after which the agent again gets one restart (a BACKOFF) before FATAL, not FATAL at its
    first death."""
    name = "recounted-restarts"
    host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name=name,
                path=str(LIFECYCLE),
                env={"ROGUE_EXIT_AFTER_WELCOME": "3"},
                max_restarts=1,
                restart_period=seconds(300),
                stable_after=seconds(0.01),
            )
        ),
        timeout=30,
    )
    try:

        def fatal(event: supervisor_pb2.WatchEventsResponse) -> bool:
            return state_name(event.state) == "FATAL"

        first = events_until(host, name, after=0, last=fatal)
        assert [state_name(e.state) for e in first].count("BACKOFF") == 1
        assert first[-1].reason.startswith("too many restarts: 2 in 300s"), first[-1].reason
        with pytest.raises(grpc.RpcError) as refused:
            execute(host, name, "echo", {}, timeout=30)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION, refused.value
        assert details(refused.value)["ErrorInfo"].metadata["state"] == "FATAL"
        host.supervisor.StartAgent(supervisor_pb2.StartAgentRequest(name=name), timeout=30)
        again = events_until(host, name, after=first[-1].sequence, last=fatal)
        states = [state_name(e.state) for e in again]
        assert states.count("BACKOFF") == 1, [
            f"{s}: {e.reason}" for s, e in zip(states, again, strict=True)
        ]
        assert again[-1].reason.startswith("too many restarts: 2 in 300s"), again[-1].reason
    finally:
        remove_agent(host, name)
