"""The scout example agent deployed into a real host and called over gRPC."""

from __future__ import annotations

from google.protobuf import struct_pb2

from ether.v1 import agent_io_pb2
from tests.support.agents import EXAMPLES, deploy
from tests.support.host import ROOT, HostProcess


def test_scout_analyzes_a_real_file(host: HostProcess) -> None:
    """Execute runs analyze_file on this repository's README and returns real counts."""
    deploy(host, EXAMPLES / "scout")
    params = struct_pb2.Struct()
    params.update({"path": str(ROOT / "proto" / "ether" / "v1" / "agent_io.proto")})
    response = host.agents.Execute(
        agent_io_pb2.ExecuteRequest(
            input=agent_io_pb2.AgentInput(agent="scout", action="analyze_file", params=params)
        ),
        timeout=30,
    )
    output = response.output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    assert output.data.struct_value["lines"] > 100
    assert output.metadata.pid > 0
    assert output.metadata.attempt == 1


def test_a_relative_path_that_is_not_there_says_where_it_was_looked_for(
    host: HostProcess,
) -> None:
    """The agent runs in its own folder: a relative path that is not found is an ERROR output
    naming the absolute path it led to, so the caller sees why."""
    name = deploy(host, EXAMPLES / "scout", name="scout-relative")
    params = struct_pb2.Struct()
    params.update({"path": "examples"})
    output = host.agents.Execute(
        agent_io_pb2.ExecuteRequest(
            input=agent_io_pb2.AgentInput(agent=name, action="explore_directory", params=params)
        ),
        timeout=30,
    ).output
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code == "not_found"
    assert str(EXAMPLES / "scout" / "examples") in output.error.message, output.error.message
    assert "relative path" in output.error.message
