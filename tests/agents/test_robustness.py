"""A misbehaving agent never takes down the host or another agent, and nothing is lost."""

from __future__ import annotations

import os
import signal

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, state_name, watch_until
from tests.support.calls import data, execute
from tests.support.host import HostProcess

MAX_FRAME = 16 * 1024 * 1024


@pytest.fixture(scope="module", autouse=True)
def agents(host: HostProcess) -> None:
    deploy(host, AGENTS / "rogue", env={"ROGUE_BANNER": "1"})
    deploy(host, AGENTS / "worker")


def test_banners_and_garbage_on_stdout_do_not_break_the_link(host: HostProcess) -> None:
    """Non-JSON lines, invalid UTF-8, bare numbers and truncated JSON before and after hello are
    counted and logged; tasks still work and the process is not restarted."""
    before = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent="rogue"), timeout=10
    )
    output = execute(host, "rogue", "garbage", {})
    assert data(output) == {"survived": True}
    assert data(execute(host, "rogue", "echo", {"after": "garbage"})) == {"after": "garbage"}
    after = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent="rogue"), timeout=10
    )
    assert after.processes[0].pid == before.processes[0].pid
    assert after.processes[0].noise_lines >= 3
    assert after.processes[0].protocol_errors >= 2


def test_print_in_user_code_goes_to_the_log(host: HostProcess) -> None:
    """print() in an SDK agent's handler cannot corrupt the frames; the text shows up in its log."""
    deploy(host, AGENTS.parent / "conformance" / "agents" / "python", name="printer")
    output = execute(host, "printer", "print", {"text": "hello from user code"})
    assert data(output) == {"printed": True}
    logs = host.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent="printer", tail_lines=100), timeout=10
    )
    assert any("hello from user code" in line.message for line in logs)


@pytest.mark.parametrize("size", [63 * 1024, 65 * 1024])
def test_results_written_one_byte_at_a_time(host: HostProcess, size: int) -> None:
    """Results of 63 KiB and 65 KiB written through 1-byte pipe writes arrive whole."""
    output = execute(host, "rogue", "sized", {"bytes": size, "chunk": 1}, timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert len(data(output)["data"]) > size - 100


def test_oversized_result_fails_only_its_task(host: HostProcess) -> None:
    """A frame one byte over the max fails that task with frame_too_large; the link resyncs."""
    # "bytes" counts the newline; the limit applies to the line without it.
    output = execute(host, "rogue", "sized", {"bytes": MAX_FRAME + 2}, timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code == "frame_too_large"
    assert data(execute(host, "rogue", "echo", {"next": 1})) == {"next": 1}


def test_twenty_megabyte_result(host: HostProcess) -> None:
    """A 20 MB result arrives whole from an SDK agent that raised its max frame."""
    deploy(
        host,
        AGENTS.parent / "conformance" / "agents" / "python",
        name="bigdata",
        max_frame=64 * 1024 * 1024,
    )
    output = execute(host, "bigdata", "big", {"bytes": 20 * 1000 * 1000}, timeout=120)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    assert len(data(output)["data"]) == 20 * 1000 * 1000


def test_twenty_megabyte_params_round_trip(host: HostProcess) -> None:
    text = "é" * (10 * 1000 * 1000)  # 20 MB of UTF-8
    output = execute(host, "bigdata", "echo", {"text": text}, timeout=120)
    assert data(output)["text"] == text


def test_a_child_that_never_answers_hits_the_deadline(host: HostProcess) -> None:
    """A task that never gets a result ends DEADLINE_EXCEEDED; other tasks are unaffected."""
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "rogue", "hang", {}, timeout=1.0)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert data(execute(host, "worker", "echo", {"ok": True})) == {"ok": True}


def test_the_hosts_deadline_answer_reaches_a_client_whose_timeout_grpc_rounded_up(
    host: HostProcess,
) -> None:
    """grpc's C-core clients send their timeout rounded up to 100 ms between 10 and 100 s: a
    10.01 s deadline arrives as 10.1 s. The host still answers DEADLINE_EXCEEDED itself, before
    the client's own timer, so the caller learns which task and agent ran out of time (not
    just grpc's bare "Deadline Exceeded")."""
    # An agent of its own: a hanging task gets the rogue's process restarted after the
    # deadline, which would fail a task another test sent it meanwhile.
    name = deploy(host, AGENTS / "rogue", name="rounding")
    with pytest.raises(grpc.RpcError) as error:
        execute(host, name, "hang", {}, timeout=10.01)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert f"on agent {name} did not finish before its deadline" in (error.value.details() or "")


def test_kill_minus_nine_mid_task_is_unavailable_and_restarts(host: HostProcess) -> None:
    """kill -9 of a busy child: its tasks fail UNAVAILABLE at once, the agent restarts by policy,
    and other agents are untouched."""
    worker_pid = (
        host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent="worker"), timeout=10
        )
        .processes[0]
        .pid
    )
    status = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent="rogue"), timeout=10
    )
    pid = status.processes[0].pid
    after = host.supervisor.StartAgent(
        supervisor_pb2.StartAgentRequest(name="rogue"), timeout=10
    ).agent.event_sequence
    future = host.agents.Execute.future(
        agent_io_pb2.ExecuteRequest(input=agent_io_pb2.AgentInput(agent="rogue", action="hang")),
        timeout=30,
    )
    stream = host.agents.ExecuteStream(
        agent_io_pb2.ExecuteStreamRequest(
            input=agent_io_pb2.AgentInput(agent="rogue", action="hang")
        ),
        timeout=30,
    )
    assert next(stream).WhichOneof("event") == "started"
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(grpc.RpcError) as error:
        future.result()
    # UNAVAILABLE, not DEADLINE_EXCEEDED: the death ended the call, not its 30 s deadline.
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(grpc.RpcError):
        list(stream)
    event = watch_until(host, "rogue", {"RUNNING"}, after=after + 1)
    assert event.pid != pid
    assert data(execute(host, "rogue", "echo", {"back": True})) == {"back": True}
    same = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent="worker"), timeout=10
    )
    assert same.processes[0].pid == worker_pid


def test_handler_ignoring_cancel_gets_its_process_restarted(host: HostProcess) -> None:
    """A handler that ignores cancel: the caller gets its deadline, and after the cancel grace the
    wedged process is replaced so its slot is not lost forever."""
    deploy(host, AGENTS / "rogue", name="wedged")
    pid = (
        host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent="wedged"), timeout=10
        )
        .processes[0]
        .pid
    )
    after = host.supervisor.StartAgent(
        supervisor_pb2.StartAgentRequest(name="wedged"), timeout=10
    ).agent.event_sequence
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "wedged", "hang", {}, timeout=0.5)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    event = watch_until(host, "wedged", {"RUNNING"}, after=after)
    assert event.pid != pid
    assert state_name(event.state) == "RUNNING"
