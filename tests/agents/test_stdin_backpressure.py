"""An agent that stops reading its stdin: the host's flow control. Past the link's high-water
mark (link/writer.py, 1 MiB queued for the agent's pipe) a Pipe stream's reader waits for the
agent before taking more of the caller's messages, so what the host holds for a slow agent is
bounded by the mark, not by what callers send; an Execute queues its own frame and then
waits the same way. Once the agent reads again every task is answered, none lost or doubled."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ether.v1 import agent_io_pb2
from tests.agents.test_pipe_batches import Requests
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, data
from tests.support.host import HostProcess

DEADLINE = 120  # generous: the machine is shared and loaded
TASKS = 40  # each ~200 kB of params: 8 MB offered, eight times the high-water mark
BLOB = 200_000


@pytest.fixture(scope="module")
def markers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder the agent may read (its sandbox shares it): the stall's marker file."""
    return tmp_path_factory.mktemp("markers")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, markers: Path) -> Iterator[HostProcess]:
    # At debug: the line that says a caller waits for an agent's stdin is the event awaited.
    process = HostProcess(
        tmp_path_factory.mktemp("host-state"), "--log-level", "debug", shared=(markers,)
    )
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


def _in_flight(host: HostProcess, agent: str) -> int:
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=agent), timeout=30).agent
    return int(info.in_flight)


def _wait_stdin_full(host: HostProcess, agent: str, logged: int) -> None:
    """The event both tests wait on: the host logs (at debug) that a caller waits for
    ``agent`` to read its stdin; without the flow control, never logged."""
    host.wait_for_log(
        lambda r: (
            r.get("event") == "agent stdin full: waiting for the agent to read"
            and r.get("agent") == agent
        ),
        timeout=DEADLINE,
        after=logged,
    )


def test_a_pipe_waits_for_an_agent_that_stops_reading_and_loses_nothing(
    host: HostProcess, markers: Path
) -> None:
    """A stall task stops the agent reading its stdin; 40 tasks of ~200 kB each follow, one
    message each, with slots for all of them. The host sends until its buffer for the agent's
    pipe passes the high-water mark, then its reader stops: the agent has far fewer than the 40
    tasks in flight while it stalls. Released, the agent answers every task with its own
    params, and the stall finds bytes waiting in its pipe."""
    agent = deploy(host, AGENTS / "rogue", name="stalled", env={"ROGUE_CONCURRENCY": "256"})
    marker = markers / "read-again"
    requests = Requests()
    answers = host.agents.Pipe(iter(requests), timeout=DEADLINE)
    logged = len(host.records)
    requests.send(
        agent_io_pb2.PipeRequest(
            inputs=[agent_input(agent, "stall", {"marker": str(marker)}, task_id="stall")]
        )
    )
    for number in range(TASKS):
        params = {"n": number, "blob": f"{number:06d}" + "x" * BLOB}
        task = agent_input(agent, "echo", params, task_id=f"big-{number}")
        requests.send(agent_io_pb2.PipeRequest(inputs=[task]))
    requests.close()
    # The event: a caller waits for this agent's stdin (without flow control, never logged).
    _wait_stdin_full(host, agent, logged)
    # The reader is parked on the drain: nothing more goes to the agent until it reads.
    held = _in_flight(host, agent)
    assert 1 < held < TASKS // 2, f"{held} tasks on an agent that does not read"
    marker.touch()
    outputs = [output for response in answers for output in response.outputs]
    by_id = {output.task_id: output for output in outputs}
    assert len(outputs) == TASKS + 1 == len(by_id)
    assert data(by_id["stall"])["waiting_bytes"] > 0
    for number in range(TASKS):
        output = by_id[f"big-{number}"]
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
        echoed = data(output)
        assert echoed["n"] == number
        assert echoed["blob"] == f"{number:06d}" + "x" * BLOB


def test_executes_to_an_agent_that_stops_reading_wait_and_are_all_answered(
    host: HostProcess, markers: Path
) -> None:
    """Execute's side of the same flow control: each call queues its own frame, and a call
    that finds the agent's pipe past the high-water mark waits for the agent to read before
    it waits for its answer. Twelve calls of ~200 kB each (2.4 MB, past the 1 MiB mark) to an
    agent that has stopped reading: the host says a caller waits for the agent's stdin; once
    the agent reads again every call is answered with its own params."""
    agent = deploy(host, AGENTS / "rogue", name="stalled-ex", env={"ROGUE_CONCURRENCY": "64"})
    marker = markers / "execute-read-again"
    logged = len(host.records)
    stall = host.agents.Execute.future(
        agent_io_pb2.ExecuteRequest(input=agent_input(agent, "stall", {"marker": str(marker)})),
        timeout=DEADLINE,
    )
    calls = []
    for number in range(12):
        params = {"n": number, "blob": f"{number:06d}" + "y" * BLOB}
        request = agent_io_pb2.ExecuteRequest(input=agent_input(agent, "echo", params))
        calls.append(host.agents.Execute.future(request, timeout=DEADLINE))
    # The event: an Execute waits for this agent's stdin (without its drain, never logged).
    _wait_stdin_full(host, agent, logged)
    assert not any(call.done() for call in calls), "answered by an agent that does not read"
    marker.touch()
    stalled = stall.result().output
    assert stalled.status == agent_io_pb2.TASK_STATUS_SUCCESS, stalled.error.message
    assert data(stalled)["waiting_bytes"] > 0
    for number, call in enumerate(calls):
        output = call.result().output
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
        echoed = data(output)
        assert echoed["n"] == number
        assert echoed["blob"] == f"{number:06d}" + "y" * BLOB
