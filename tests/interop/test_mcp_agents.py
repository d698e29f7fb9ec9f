"""MCP stdio servers as agents: unmodified servers written with the official Python SDK, run
and supervised by the host, their tools called through Execute, ExecuteStream, Pipe, CancelTask
and workflow stages like the actions of any agent (docs/interop.md, "MCP servers as agents")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import deploy
from tests.support.calls import agent_input, data, details, execute
from tests.support.host import HostProcess

PY_SERVER = Path(__file__).resolve().parent / "mcp_servers_py"


@pytest.fixture(scope="module", autouse=True)
def pytools(host: HostProcess) -> str:
    """The Python SDK server, deployed from its folder (agent.toml of kind "mcp")."""
    return deploy(host, PY_SERVER)


def actions(host: HostProcess, agent: str) -> dict[str, agent_io_pb2.ActionSpec]:
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=agent), timeout=10).agent
    return {a.name: a for a in info.actions}


def test_tools_are_the_agents_actions(host: HostProcess) -> None:
    """tools/list becomes the directory: inputSchema as params schema, outputSchema as result
    schema when the tool has one, the server's name and version as the agent's."""
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="pytools"), timeout=10).agent
    listed = {a.name: a for a in info.actions}
    assert {"echo", "add", "count", "sleep", "fail", "grow", "crash", "garbage"} <= set(listed)
    assert dict(listed["add"].params_schema)["required"] == ["a", "b"]
    assert set(dict(listed["add"].result_schema)["properties"]) == {"total", "terms"}
    assert not listed["echo"].HasField("result_schema")
    assert info.description == "Tools of an MCP server written with the official Python SDK."
    assert info.state == agent_io_pb2.AGENT_STATE_RUNNING
    assert info.max_concurrency == 64


def test_execute_maps_structured_and_text_content(host: HostProcess) -> None:
    """structuredContent is the task's data; without it, data holds the content blocks and
    their text."""
    added = execute(host, "pytools", "add", {"a": 2, "b": 40})
    assert added.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert data(added) == {"total": 42, "terms": [2, 40]}
    echoed = execute(host, "pytools", "echo", {"text": "hello"})
    assert data(echoed) == {"content": [{"type": "text", "text": "hello"}], "text": "hello"}
