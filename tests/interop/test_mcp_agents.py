"""MCP stdio servers as agents: an unmodified server written with the official Python SDK
(tests/interop/mcp_servers_py), run and supervised by the host, its tools called through
Execute, ExecuteStream, Pipe, CancelTask, agent.call and workflow stages like the actions of
any agent (docs/interop.md, "MCP servers as agents")."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, state_name, until, watch_until
from tests.support.calls import agent_input, budget, data, details, execute
from tests.support.host import HostProcess
from tests.support.wheel import build_wheel
from tests.workflows.runs import run_to_end, stage_states, state, value

PY_SERVER = Path(__file__).resolve().parent / "mcp_servers_py"


@pytest.fixture(scope="module", autouse=True)
def pytools(host: HostProcess) -> str:
    """The Python SDK server, deployed from its folder (agent.toml: kind = "mcp", command)."""
    return deploy(host, PY_SERVER)


def actions(host: HostProcess, agent: str) -> dict[str, agent_io_pb2.ActionSpec]:
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=agent), timeout=10).agent
    return {a.name: a for a in info.actions}


def log_until(host: HostProcess, agent: str, found: Callable[[supervisor_pb2.LogLine], bool]):
    """The first line of the agent's log (history, then followed) that ``found`` accepts."""
    stream = host.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent=agent, tail_lines=1000, follow=True), timeout=60
    )
    try:
        for line in stream:
            if found(line):
                return line
    finally:
        stream.cancel()
    raise AssertionError(f"{agent}: no such log line")


def deploy_running(host: HostProcess, path: Path, name: str, **spec: Any) -> int:
    """Deploy, wait until the first replica runs; the sequence of that event."""
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(name=name, path=str(path), **spec)
        ),
        timeout=30,
    )
    event = until(host, response.agent, {"RUNNING", "FATAL"})
    assert state_name(event.state) == "RUNNING", event.reason
    return event.sequence


def processes(host: HostProcess, agent: str) -> list[supervisor_pb2.ProcessInfo]:
    request = supervisor_pb2.ListProcessesRequest(agent=agent)
    return list(host.supervisor.ListProcesses(request, timeout=10).processes)


def test_tools_are_the_agents_actions(host: HostProcess) -> None:
    """tools/list becomes the directory: inputSchema as params schema, outputSchema as result
    schema when the tool has one, and the agent.toml's description."""
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="pytools"), timeout=10).agent
    listed = {a.name: a for a in info.actions}
    assert {"echo", "add", "count", "sleep", "fail", "grow", "crash", "garbage"} <= set(listed)
    assert dict(listed["add"].params_schema)["required"] == ["a", "b"]
    assert set(dict(listed["add"].result_schema)["properties"]) == {"total", "terms"}
    assert not listed["echo"].HasField("result_schema")
    assert listed["echo"].unusable == ""
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


def test_params_are_checked_against_the_input_schema(host: HostProcess) -> None:
    """Params that do not match a tool's inputSchema never reach the server."""
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "pytools", "add", {"a": "two"})
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(error.value)["ErrorInfo"].reason == "INVALID_PARAMS"


def test_is_error_is_a_task_error(host: HostProcess) -> None:
    """A result with isError is status ERROR, code tool_error, the tool's text as message."""
    output = execute(host, "pytools", "fail", {"message": "disk on fire"})
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code == "tool_error"
    assert "disk on fire" in output.error.message


def test_progress_notifications_are_stream_events(host: HostProcess) -> None:
    """notifications/progress of a tools/call arrive as ExecuteStream progress events."""
    request = agent_io_pb2.ExecuteStreamRequest(input=agent_input("pytools", "count", {"n": 3}))
    events = list(host.agents.ExecuteStream(request, timeout=30))
    progress = [e.progress for e in events if e.WhichOneof("event") == "progress"]
    assert [(p.progress, p.total, p.message) for p in progress] == [
        (1, 3, "step 1"),
        (2, 3, "step 2"),
        (3, 3, "step 3"),
    ]
    assert events[-1].output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert data(events[-1].output)["text"] == "counted to 3"


def test_cancel_task_sends_notifications_cancelled(host: HostProcess) -> None:
    """CancelTask ends a running tools/call: the caller gets CANCELLED, the server gets
    notifications/cancelled (its handler is cancelled and says so on stderr, the agent's log),
    and the agent keeps working."""
    request = agent_io_pb2.ExecuteStreamRequest(
        input=agent_input("pytools", "sleep", {"seconds": 61}, task_id="mcp-cancel")
    )
    pid = processes(host, "pytools")[0].pid
    stream = host.agents.ExecuteStream(request, timeout=30)
    assert next(stream).WhichOneof("event") == "started"
    assert next(stream).progress.message == "sleeping"  # the handler runs
    reply = host.agents.CancelTask(
        agent_io_pb2.CancelTaskRequest(task_id="mcp-cancel", reason="test"), timeout=10
    )
    assert reply.cancelled
    with pytest.raises(grpc.RpcError) as error:
        list(stream)
    assert error.value.code() == grpc.StatusCode.CANCELLED
    log_until(host, "pytools", lambda line: "sleep of 61.0s cancelled" in line.message)
    # Answered at once, not after cancel_grace: the process was not restarted as wedged.
    assert processes(host, "pytools")[0].pid == pid
    assert data(execute(host, "pytools", "echo", {"text": "after"}))["text"] == "after"


def test_deadline_cancels_the_tool_call(host: HostProcess) -> None:
    """A task past its budget.max_time is DEADLINE_EXCEEDED and its tools/call is cancelled."""
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "pytools", "sleep", {"seconds": 62}, context=_context(max_time=0.5))
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    log_until(host, "pytools", lambda line: "sleep of 62.0s cancelled" in line.message)


def _context(**limits: float) -> agent_io_pb2.TaskContext:
    return agent_io_pb2.TaskContext(budget=budget(**limits))


def test_log_notifications_go_to_stream_logs(host: HostProcess) -> None:
    """notifications/message from the server is a line of the agent's log, with its level."""
    assert data(execute(host, "pytools", "shout", {"text": "hi"}))["text"] == "HI"
    line = log_until(host, "pytools", lambda line: line.message == "shouting hi")
    assert line.source == "log"
    assert line.level == "warning"


def test_pipe_pipelines_tool_calls(host: HostProcess) -> None:
    """Pipe sends many tools/call at once over the one stdio link and answers each."""

    def requests() -> Iterator[agent_io_pb2.PipeRequest]:
        yield agent_io_pb2.PipeRequest(
            input=agent_input("pytools", "add", {"a": 0, "b": 1}, task_id="p-0"),
            max_in_flight=16,
        )
        for i in range(1, 40):
            yield agent_io_pb2.PipeRequest(
                input=agent_input("pytools", "add", {"a": i, "b": 1}, task_id=f"p-{i}")
            )

    outputs = {r.output.task_id: r.output for r in host.agents.Pipe(requests(), timeout=60)}
    assert len(outputs) == 40
    assert all(data(outputs[f"p-{i}"])["total"] == i + 1 for i in range(40))


def test_workflow_stages_run_tools(host: HostProcess) -> None:
    """Workflow stages name an MCP agent and tool like any agent and action; a tool's
    structuredContent is the stage data later stages read."""
    run = run_to_end(
        host,
        """\
name: mcp-stages
stages:
  - name: sum
    agent: pytools
    action: add
    params: {a: "${input.a}", b: "${input.b}"}
    inputs: [{a: 1, b: 2}, {a: 3, b: 4}]
    parallel: true
  - name: again
    agent: pytools
    action: add
    params: {a: "${input}", b: 100}
    input_from: sum.data.*.total
""",
    )
    assert state(run) == "SUCCEEDED", run.error.message
    assert stage_states(run) == {"sum": "SUCCEEDED", "again": "SUCCEEDED"}
    assert [d["total"] for d in value(run.result)] == [103, 107]


def test_other_agents_call_tools_with_agent_call(host: HostProcess) -> None:
    """An Ether agent's agent.call reaches an MCP tool through the host."""
    deploy(host, AGENTS / "worker")
    output = execute(
        host,
        "worker",
        "relay",
        {"agent": "pytools", "action": "add", "params": {"a": 20, "b": 22}},
    )
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    assert "42" in str(data(output))


def test_unusable_tool_is_listed_with_its_reason(host: HostProcess) -> None:
    """A tool whose inputSchema is not a valid JSON Schema stays listed as unusable with the
    reason; calling it is FAILED_PRECONDITION naming it; the other tools work."""
    broken = actions(host, "pytools")["broken"]
    assert "inputSchema is not a valid JSON Schema" in broken.unusable
    assert "integral" in broken.unusable
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "pytools", "broken", {"x": 1})
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert details(error.value)["ErrorInfo"].reason == "ACTION_UNUSABLE"
    assert "integral" in (error.value.details() or "")
    assert data(execute(host, "pytools", "echo", {"text": "fine"}))["text"] == "fine"


def test_garbage_on_stdout_is_logged_and_the_agent_keeps_working(host: HostProcess) -> None:
    """A stdout line that is not JSON-RPC is logged and counted; the call it came with and
    the calls after it succeed on the same process."""
    pid = processes(host, "pytools")[0].pid
    output = execute(host, "pytools", "garbage")
    assert data(output)["text"] == "still here"
    log_until(host, "pytools", lambda line: "not JSON-RPC" in line.message)
    (process,) = processes(host, "pytools")
    assert process.noise_lines >= 1
    assert process.pid == pid
    assert data(execute(host, "pytools", "echo", {"text": "ok"}))["text"] == "ok"


def test_response_to_an_unknown_id_is_logged_and_dropped(host: HostProcess) -> None:
    """A response naming a request id the host never sent is logged and dropped."""
    before = processes(host, "pytools")[0].protocol_errors
    assert data(execute(host, "pytools", "stray_answer"))["text"] == "answered"
    line = log_until(host, "pytools", lambda line: "unknown request id" in line.message)
    assert "987654" in str(line.fields)
    assert processes(host, "pytools")[0].protocol_errors > before


def test_tool_list_change_refreshes_the_directory(host: HostProcess, tmp_path: Path) -> None:
    """notifications/tools/list_changed: the host lists the tools again, the directory shows
    the new one, WatchEvents says so, and the new tool runs."""
    after = deploy_running(host, PY_SERVER, "growing")
    assert "extra" not in actions(host, "growing")
    assert data(execute(host, "growing", "grow"))["text"] == "grown"
    event = watch_until(host, "growing", {"RUNNING"}, after=after)
    assert event.reason.startswith("tools changed:") and "extra" in event.reason
    assert "extra" in actions(host, "growing")
    assert data(execute(host, "growing", "extra"))["text"] == "extra here"


def test_crash_mid_call_is_unavailable_and_the_server_restarts(host: HostProcess) -> None:
    """A server that dies during a tools/call: the caller gets UNAVAILABLE (AGENT_DIED), the
    supervisor restarts it by policy, and it answers again."""
    after = deploy_running(host, PY_SERVER, "crashy")
    first = processes(host, "crashy")[0]
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "crashy", "crash")
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    assert details(error.value)["ErrorInfo"].reason == "AGENT_DIED"
    event = watch_until(host, "crashy", {"RUNNING", "FATAL"}, after=after)
    assert state_name(event.state) == "RUNNING"
    assert data(execute(host, "crashy", "echo", {"text": "back"}))["text"] == "back"
    assert processes(host, "crashy")[0].pid != first.pid
    assert processes(host, "crashy")[0].restarts == 1


def test_deploy_agent_fields_alone_and_replicas(host: HostProcess, tmp_path: Path) -> None:
    """DeployAgent's protocol MCP and command run a folder without agent.toml; replicas run one
    server process each and tasks go to both."""
    folder = tmp_path / "bare"
    folder.mkdir()
    shutil.copy(PY_SERVER / "server.py", folder / "server.py")
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name="bare",
                path=str(folder),
                protocol=supervisor_pb2.LINK_PROTOCOL_MCP,
                command=["python", "server.py"],
                replicas=2,
                max_concurrency=4,
            )
        ),
        timeout=30,
    )
    assert response.agent.spec.protocol == supervisor_pb2.LINK_PROTOCOL_MCP
    assert list(response.agent.spec.command) == ["python", "server.py"]
    assert response.agent.spec.max_concurrency == 4
    for replica in (0, 1):
        until(host, response.agent, {"RUNNING"}, replica=replica)
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="bare"), timeout=10).agent
    assert (info.max_concurrency, info.ready_replicas) == (4, 2)
    pids = {execute(host, "bare", "sleep", {"seconds": 0.01}).metadata.pid for _ in range(2)}
    assert len([p for p in processes(host, "bare") if p.pid]) == 2
    assert pids <= {p.pid for p in processes(host, "bare")}


def test_install_pip_puts_requirements_on_the_servers_path(
    host: HostProcess, tmp_path: Path
) -> None:
    """[install] pip = true installs the folder's requirements.txt (here a local wheel) before
    the first start, and the server imports it."""
    folder = tmp_path / "with-deps"
    folder.mkdir()
    wheel = build_wheel(tmp_path, "tinydep", "1.0", "ANSWER = 42\n")
    (folder / "requirements.txt").write_text(f"{wheel}\n")
    (folder / "server.py").write_text(
        "import tinydep\n"
        "from mcp.server.mcpserver import MCPServer\n"
        "server = MCPServer('deps')\n"
        "@server.tool(structured_output=False)\n"
        "def answer() -> str:\n"
        "    return str(tinydep.ANSWER)\n"
        "server.run('stdio')\n"
    )
    (folder / "agent.toml").write_text(
        'kind = "mcp"\ncommand = ["python", "server.py"]\n[install]\npip = true\n'
    )
    deploy(host, folder, name="withdeps")
    assert data(execute(host, "withdeps", "answer"))["text"] == "42"


def test_a_result_against_its_output_schema_is_an_error(host: HostProcess) -> None:
    """structuredContent that does not match the tool's outputSchema is refused by the SDK's
    client: status ERROR, code mcp_invalid_result, saying why."""
    output = execute(host, "pytools", "liar", {"a": 7})
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code == "mcp_invalid_result"
    assert "liar" in output.error.message and "is not of type 'string'" in output.error.message
    assert data(execute(host, "pytools", "echo", {"text": "next"}))["text"] == "next"


def test_the_servers_requests_are_answered(host: HostProcess) -> None:
    """The server's ping is answered; a request the host does not offer (roots/list) is answered
    with JSON-RPC error -32601, and the tool call that made them completes."""
    text = data(execute(host, "pytools", "ask_client"))["text"]
    assert text.startswith("ping answered; roots/list refused: -32601"), text


def test_a_json_rpc_error_answer_is_a_task_error(host: HostProcess) -> None:
    """A JSON-RPC error in answer to tools/call is status ERROR mcp_error with the server's
    message and code; the server's second answer to the same id is dropped, and it works on."""
    output = execute(host, "pytools", "reject")
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code == "mcp_error"
    assert output.error.message == "rejected by the server"
    assert dict(output.error.details)["jsonrpc_code"] == -32000
    assert data(execute(host, "pytools", "echo", {"text": "next"}))["text"] == "next"
