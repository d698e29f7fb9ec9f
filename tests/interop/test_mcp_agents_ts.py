"""An MCP stdio server written with the official TypeScript SDK (tests/interop/mcp_servers_ts)
as an agent: the same mapping as for the Python SDK's server, through Execute, ExecuteStream,
Pipe and a workflow stage, with a tool list served in pages (docs/interop.md, "MCP servers as
agents")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.interop.test_mcp_agents import deploy_running, log_until, processes
from tests.support.agents import deploy, state_name, watch_until
from tests.support.calls import agent_input, data, details, execute
from tests.support.host import HostProcess
from tests.workflows.runs import run_to_end, state, value

TS_SERVER = Path(__file__).resolve().parent / "mcp_servers_ts"


@pytest.fixture(scope="module", autouse=True)
def tstools(host: HostProcess) -> str:
    """The TypeScript SDK server from its folder (agent.toml: kind "mcp", node dist/server.js,
    [install] npm; `make setup` installed and built it)."""
    return deploy(host, TS_SERVER)


def test_every_page_of_tools_is_listed(host: HostProcess) -> None:
    """The server lists two tools per page: the host follows nextCursor to the last page; the
    server's version, output schemas and idempotentHint come along."""
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="tstools"), timeout=10).agent
    listed = {a.name: a for a in info.actions}
    assert list(listed) == [
        "echo",
        "add",
        "count",
        "sleep",
        "fail",
        "shout",
        "grow",
        "crash",
        "garbage",
    ]
    assert info.version == "1.2.3"
    assert set(dict(listed["add"].result_schema)["properties"]) == {"total", "terms"}
    assert listed["add"].idempotent and not listed["echo"].idempotent
    assert not listed["echo"].HasField("result_schema")


def test_execute_and_is_error(host: HostProcess) -> None:
    """structuredContent as data, text content as blocks, isError as status ERROR."""
    assert data(execute(host, "tstools", "add", {"a": 40, "b": 2})) == {
        "total": 42,
        "terms": [40, 2],
    }
    assert data(execute(host, "tstools", "echo", {"text": "hey"}))["text"] == "hey"
    failed = execute(host, "tstools", "fail", {"message": "no luck"})
    assert failed.status == agent_io_pb2.TASK_STATUS_ERROR
    assert (failed.error.code, failed.error.message) == ("tool_error", "no luck")


def test_progress_and_log_notifications(host: HostProcess) -> None:
    """Progress notifications are ExecuteStream events; notifications/message is a log line."""
    request = agent_io_pb2.ExecuteStreamRequest(input=agent_input("tstools", "count", {"n": 2}))
    events = list(host.agents.ExecuteStream(request, timeout=30))
    progress = [e.progress for e in events if e.WhichOneof("event") == "progress"]
    assert [(p.progress, p.total, p.message) for p in progress] == [
        (1, 2, "step 1"),
        (2, 2, "step 2"),
    ]
    assert data(execute(host, "tstools", "shout", {"text": "yo"}))["text"] == "YO"
    line = log_until(host, "tstools", lambda line: line.message == "shouting yo")
    assert (line.source, line.level, dict(line.fields)["logger"]) == ("log", "warning", "shout")


def test_cancel_reaches_the_handler(host: HostProcess) -> None:
    """A cancelled task's notifications/cancelled aborts the TypeScript handler's signal."""
    request = agent_io_pb2.ExecuteStreamRequest(
        input=agent_input("tstools", "sleep", {"seconds": 63}, task_id="ts-cancel")
    )
    pid = processes(host, "tstools")[0].pid
    stream = host.agents.ExecuteStream(request, timeout=30)
    assert next(stream).WhichOneof("event") == "started"
    assert next(stream).progress.message == "sleeping"  # the handler runs
    host.agents.CancelTask(agent_io_pb2.CancelTaskRequest(task_id="ts-cancel"), timeout=10)
    with pytest.raises(grpc.RpcError) as error:
        list(stream)
    assert error.value.code() == grpc.StatusCode.CANCELLED
    log_until(host, "tstools", lambda line: "sleep of 63s cancelled" in line.message)
    assert processes(host, "tstools")[0].pid == pid  # not restarted as wedged


def test_pipe_and_workflow_stage(host: HostProcess) -> None:
    """Pipe and a workflow stage call the TypeScript tools like any action."""

    def requests() -> Iterator[agent_io_pb2.PipeRequest]:
        for i in range(20):
            yield agent_io_pb2.PipeRequest(
                input=agent_input("tstools", "add", {"a": i, "b": i}, task_id=f"ts-{i}"),
                max_in_flight=8,
            )

    outputs = {r.output.task_id: r.output for r in host.agents.Pipe(requests(), timeout=60)}
    assert [data(outputs[f"ts-{i}"])["total"] for i in range(20)] == [2 * i for i in range(20)]
    run = run_to_end(
        host,
        """\
name: ts-stage
stages:
  - {name: sum, agent: tstools, action: add, params: {a: 5, b: 6}}
""",
    )
    assert state(run) == "SUCCEEDED", run.error.message
    assert value(run.result) == {"total": 11, "terms": [5, 6]}


def test_garbage_on_stdout_is_logged(host: HostProcess) -> None:
    """A line of garbage on stdout is logged and counted; the server keeps working."""
    assert data(execute(host, "tstools", "garbage"))["text"] == "still here"
    log_until(host, "tstools", lambda line: "not JSON-RPC" in line.message)
    assert processes(host, "tstools")[0].noise_lines >= 1
    assert data(execute(host, "tstools", "echo", {"text": "on"}))["text"] == "on"


def test_tool_list_change_and_crash(host: HostProcess) -> None:
    """The SDK's list_changed after a new tool refreshes the directory; a crash mid-call is
    UNAVAILABLE and the server is restarted with its first tool list."""
    after = deploy_running(host, TS_SERVER, "tsgrow")
    assert data(execute(host, "tsgrow", "grow"))["text"] == "grown"
    event = watch_until(host, "tsgrow", {"RUNNING"}, after=after)
    assert "extra" in event.reason
    assert data(execute(host, "tsgrow", "extra"))["text"] == "extra here"
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "tsgrow", "crash")
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    assert details(error.value)["ErrorInfo"].reason == "AGENT_DIED"
    restarted = watch_until(host, "tsgrow", {"RUNNING", "FATAL"}, after=event.sequence)
    assert state_name(restarted.state) == "RUNNING"
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="tsgrow"), timeout=10).agent
    assert "extra" not in {a.name for a in info.actions}
    request = supervisor_pb2.ListProcessesRequest(agent="tsgrow")
    assert host.supervisor.ListProcesses(request, timeout=10).processes[0].restarts == 1
