"""MCP servers that fail the handshake end FATAL with a reason that says what went wrong; the
host keeps serving (docs/interop.md, "MCP servers as agents": bad input)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import state_name, watch_until
from tests.support.calls import details, execute
from tests.support.host import HostProcess

PY_SERVERS = Path(__file__).resolve().parent / "mcp_servers_py"


def deploy_failing(
    host: HostProcess, name: str, script: str, start_timeout: int = 2
) -> supervisor_pb2.WatchEventsResponse:
    """Deploy ``script`` of the test servers' folder as an MCP agent with a 2 s start timeout
    (by default) and no start retries; the event that ends its start."""
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name=name,
                path=str(PY_SERVERS),
                protocol=supervisor_pb2.LINK_PROTOCOL_MCP,
                command=["python", script],
                start_timeout=duration_pb2.Duration(seconds=start_timeout),
                start_retries=0,
            )
        ),
        timeout=30,
    )
    after = response.agent.event_sequence
    return watch_until(host, name, {"RUNNING", "FATAL"}, after=after, replica=0)


def test_no_answer_to_initialize_is_fatal_with_the_stderr_tail(host: HostProcess) -> None:
    """A server silent after initialize is FATAL after start_timeout; the event carries its
    stderr tail and a call to it says why it is not running."""
    event = deploy_failing(host, "silent", "silent.py")
    assert state_name(event.state) == "FATAL"
    assert "no answer to MCP initialize" in event.reason and "2s" in event.reason
    assert "silent server: reading requests, answering none" in event.stderr_tail
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "silent", "anything")
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert details(error.value)["ErrorInfo"].reason == "AGENT_NOT_RUNNING"
    assert "no answer to MCP initialize" in (error.value.details() or "")


def test_unsupported_protocol_version_is_fatal_naming_both(host: HostProcess) -> None:
    """A server that answers another protocol version is FATAL at once (no restart can help),
    the reason naming its version and the host's."""
    event = deploy_failing(host, "ancient", "old_version.py")
    assert state_name(event.state) == "FATAL"
    assert "'1999-01-01'" in event.reason
    assert "2025-11-25" in event.reason
    processes = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent="ancient"), timeout=10
    ).processes
    assert [p.restarts for p in processes] == [0]


def test_the_host_serves_on(host: HostProcess) -> None:
    """After both failures the host answers as before."""
    listed = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=10).agents
    assert {"silent", "ancient"} <= {a.name for a in listed}


def test_a_server_that_exits_at_once_fails_with_its_stderr(host: HostProcess) -> None:
    """A server that dies before answering initialize fails its start for that reason (not a
    timeout), its last stderr line in the event."""
    event = deploy_failing(host, "quitter", "exits.py", start_timeout=120)
    assert state_name(event.state) == "FATAL"
    assert "exited before answering initialize" in event.reason, event.reason
    assert "exits: cannot open my database" in event.stderr_tail
