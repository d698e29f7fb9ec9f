"""The dispatcher's batch path (agents/batch.py): the tasks of a Pipe batch sent together and
answered by callbacks keep what one Execute has: a task past its deadline fails alone and the
agent is told to stop, a caller that goes away stops every task of its batch, and a batch whose
agent process is killed retries its idempotent tasks and fails the others alone."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.agents.test_pipe_batches import Requests
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, budget, data
from tests.support.host import HostProcess

DEADLINE = 120  # generous: the machine is shared and loaded


@pytest.fixture(scope="module")
def markers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder the agents may write in (their sandbox shares it): the gates' marker files."""
    return tmp_path_factory.mktemp("markers")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, markers: Path) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("host-state"), shared=(markers,))
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module", autouse=True)
def flow(host: HostProcess) -> str:
    deploy(host, AGENTS / "rogue")
    return deploy(host, AGENTS / "flow")


def _in_flight(host: HostProcess, agent: str) -> int:
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=agent), timeout=30).agent
    return int(info.in_flight)


def _wait_in_flight(host: HostProcess, agent: str, count: int) -> None:
    """Until the agent runs ``count`` tasks (polled with a budget; no timing is asserted)."""
    budget_end = time.monotonic() + DEADLINE
    while _in_flight(host, agent) != count:
        assert time.monotonic() < budget_end, f"{agent} never ran {count} tasks at once"
        time.sleep(0.05)


def test_a_batch_task_past_its_deadline_fails_alone_and_the_agent_is_told(
    host: HostProcess,
) -> None:
    """Two tasks with budget.max_time of one second in a batch of echoes: a hold (the SDK agent
    gives up at the deadline the host sent) and a hang on an agent that ignores deadlines and
    cancels (the host's own deadline ends it). The echoes succeed, both are answered
    task_deadline_exceeded in the stream, and the hold got its cancel (it ended)."""
    one_second = agent_io_pb2.TaskContext(budget=budget(max_time=1.0))
    late = agent_input("flow", "hold", {"tag": "late"}, task_id="late", context=one_second)
    hang = agent_input("rogue", "hang", {}, task_id="hang", context=one_second)
    echoes = [agent_input("flow", "echo", {"n": n}, task_id=f"in-time-{n}") for n in range(5)]
    request = agent_io_pb2.PipeRequest(inputs=[late, hang, *echoes])
    outputs = [o for r in host.agents.Pipe(iter([request]), timeout=DEADLINE) for o in r.outputs]
    by_id = {o.task_id: o for o in outputs}
    assert sorted(by_id) == sorted(["late", "hang", *(f"in-time-{n}" for n in range(5))])
    assert all(data(by_id[f"in-time-{n}"]) == {"n": n} for n in range(5))
    for task_id in ("late", "hang"):
        assert by_id[task_id].status == agent_io_pb2.TASK_STATUS_ERROR
        assert by_id[task_id].error.code == "task_deadline_exceeded"
    _wait_in_flight(host, "flow", 0)  # the hold saw its cancel and ended


def test_a_caller_going_away_stops_every_task_of_its_batch(host: HostProcess) -> None:
    """Three holds in one batch, running; the client cancels the call: each hold gets its
    cancel frame, so the agent ends them all (nothing waits on the agent for ever)."""
    requests = Requests()
    holds = [
        agent_input("flow", "hold", {"tag": f"gone-{i}"}, task_id=f"gone-{i}") for i in range(3)
    ]
    requests.send(agent_io_pb2.PipeRequest(inputs=holds))
    # The call's deadline (the holds' too) lies well past the waits below: only the cancel
    # frames can end the holds in time.
    call = host.agents.Pipe(iter(requests), timeout=DEADLINE * 5)
    try:
        _wait_in_flight(host, "flow", 3)
    finally:
        call.cancel()
        requests.close()
    with pytest.raises(grpc.RpcError) as caught:
        list(call)
    assert caught.value.code() == grpc.StatusCode.CANCELLED
    _wait_in_flight(host, "flow", 0)


def test_a_killed_agent_retries_the_idempotent_tasks_of_a_batch_and_fails_the_others(
    host: HostProcess, markers: Path
) -> None:
    """A batch of a gate (idempotent), a gate_once (not) and an echo; once the echo is answered,
    the agent's process is SIGKILLed with both gates running: the gate runs again on the
    restarted process (attempt 2, where its marker lets it pass), the gate_once is answered
    agent_died alone, and the stream ends normally."""
    name = deploy(
        host,
        AGENTS / "flow",
        name="flow-killed",
        backoff_base=duration_pb2.Duration(nanos=200_000_000),
    )
    try:
        batch = [
            agent_input(name, "gate", {"marker": str(markers / "again")}, task_id="again"),
            agent_input(name, "gate_once", {"marker": str(markers / "once")}, task_id="once"),
            agent_input(name, "echo", {"before": True}, task_id="before"),
        ]
        requests = Requests()
        requests.send(agent_io_pb2.PipeRequest(inputs=batch))
        answers = host.agents.Pipe(iter(requests), timeout=DEADLINE)
        outputs: list[agent_io_pb2.AgentOutput] = []
        for response in answers:
            outputs += response.outputs
            if any(o.task_id == "before" for o in outputs):
                break
        _wait_in_flight(host, name, 2)
        listed = host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent=name), timeout=30
        )
        (killed,) = [p.pid for p in listed.processes]
        os.kill(killed, signal.SIGKILL)
        requests.close()
        outputs += [o for r in answers for o in r.outputs]
        by_id = {o.task_id: o for o in outputs}
        assert sorted(by_id) == ["again", "before", "once"]
        assert data(by_id["before"]) == {"before": True}
        again = by_id["again"]
        assert again.status == agent_io_pb2.TASK_STATUS_SUCCESS, again.error.message
        assert data(again) == {"passed": None}
        assert again.metadata.attempt == 2
        assert again.metadata.pid not in (0, killed)
        assert by_id["once"].status == agent_io_pb2.TASK_STATUS_ERROR
        assert by_id["once"].error.code == "agent_died"
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=60)
