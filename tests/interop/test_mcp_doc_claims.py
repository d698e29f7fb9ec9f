"""The rows of docs/interop.md's two MCP tables that no other test asserts, as a user sees them on
a real host: an MCP server written with the official Python SDK deployed as an agent (its
handshake, instructions, annotations, titles, content blocks, log levels, stderr and stop), and
Ether agents as MCP tools through both fronts, read with the SDK's client (titles, hints,
schemas, text and _meta)."""

from __future__ import annotations

import json
import signal
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import grpc
import mcp_types as types
import pytest
from google.protobuf import duration_pb2, json_format

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, state_name, until, watch_until
from tests.support.calls import data, execute
from tests.support.host import HostProcess

from .mcp_clients import SURFACES, mcp_session
from .test_mcp_tools import CALCULATOR

# The server, written into the test's folder (as test_mcp_agents.py's pip test writes its own).
# argv: the folder it leaves notes in; "stubborn": it stays at stdin's end; "deaf": and ignores
# SIGTERM too. Its notes (a file, written before it exits) say what reached it, in order.
SERVER = """
import base64, os, signal, sys
from pathlib import Path
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

NOTES = Path(sys.argv[1])
MODE = sys.argv[2] if len(sys.argv) > 2 else ""
NAME = os.environ.get("ETHER_AGENT_NAME", "")
server = MCPServer("doc-claims", version="4.5.6", instructions="Claims of docs/interop.md.")

def note(line):
    with (NOTES / f"{NAME}.notes").open("a") as notes:
        notes.write(line + "\\n")

def on_term(*_):
    note("SIGTERM")
    if MODE != "deaf":
        sys.exit(0)

signal.signal(signal.SIGTERM, on_term)

@server.tool(description="Dies the first time it sees a key.",
             annotations=types.ToolAnnotations(read_only_hint=True), structured_output=False)
def lookup(key: str) -> str:
    seen = NOTES / f"{NAME}-{key}.seen"
    if not seen.exists():
        seen.write_text("")
        os._exit(3)
    return f"found {key}"

@server.tool(description="Idempotent.", annotations=types.ToolAnnotations(idempotent_hint=True))
def store(key: str) -> str:
    return key

@server.tool(description="Neither hint.", annotations=types.ToolAnnotations(destructive_hint=True))
def launch() -> str:
    return "launched"

@server.tool(title="Only a title")
def titled() -> str:
    return "titled"

PNG = base64.b64encode(b"\\x89PNG\\r\\n").decode()
BLOCKS = [
    types.TextContent(text="one"),
    types.ImageContent(data=PNG, mime_type="image/png"),
    types.AudioContent(data=PNG, mime_type="audio/wav"),
    types.ResourceLink(uri="file:///tmp/a.txt", name="a.txt"),
    types.EmbeddedResource(resource=types.TextResourceContents(uri="memo://x", text="memo")),
    types.TextContent(text="two"),
]

@server.tool(description="Every kind of content block.", structured_output=False)
def blocks() -> list[types.ContentBlock]:
    return BLOCKS

@server.tool(description="An error with a picture.")
def smudge() -> types.CallToolResult:
    return types.CallToolResult(content=BLOCKS[:2], is_error=True)

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]

@server.tool(description="Log at every MCP level.", structured_output=False)
async def levels(ctx: Context) -> str:
    for level in LEVELS:
        await ctx.log(level, f"at {level}", logger_name="levels")
    return "logged"

@server.tool(description="Say it on stderr.", structured_output=False)
def whisper(text: str) -> str:
    print(text, file=sys.stderr, flush=True)
    return "said"

server.run("stdio")
note("stdin closed")
while MODE in ("stubborn", "deaf"):
    signal.pause()
"""

# A server written by hand to the protocol, speaking one revision (argv[1]); its one tool has no
# params schema and a result schema that is not an object's, which the SDK's servers never list.
OLD_SERVER = """
import json, sys
TOOL = {"name": "numbers", "inputSchema": {}, "outputSchema": {"type": "array"}}
for line in sys.stdin:
    request = json.loads(line)
    result = {"tools": [TOOL]} if request.get("method") == "tools/list" else {}
    if request.get("method") == "initialize":
        result = {"protocolVersion": sys.argv[1], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "old", "version": "0.1"}}
    if "id" in request:
        print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}), flush=True)
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The servers' folder; also where they leave notes (granted read-write)."""
    made = tmp_path_factory.mktemp("mcp-claims")
    (made / "server.py").write_text(textwrap.dedent(SERVER))
    (made / "old.py").write_text(textwrap.dedent(OLD_SERVER))
    return made


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, folder: Path) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("mcp-claims-host"), shared=(folder,), http=True)
    try:
        process.wait_serving()
        for agent in (CALCULATOR, AGENTS / "flow", AGENTS / "halfway"):
            deploy(process, agent)
        for name, args in (("claims", ()), ("raw", ("old.py", "2025-06-18"))):
            event = deploy_server(process, folder, name, *args)
            assert state_name(event.state) == "RUNNING", event.reason
        yield process
    finally:
        process.stop()


def deploy_server(host: HostProcess, folder: Path, name: str, *args: str, **spec: Any) -> Any:
    """Deploy a server of ``folder`` with DeployAgent's MCP fields alone (no agent.toml, so no
    description of its own); the event that ends its start."""
    command = ["python", *(args or ("server.py", str(folder)))]
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name=name,
                path=str(folder),
                protocol=supervisor_pb2.LINK_PROTOCOL_MCP,
                command=command,
                **spec,
            )
        ),
        timeout=30,
    )
    return until(host, response.agent, {"RUNNING", "FATAL"})


def agent_info(host: HostProcess, name: str) -> agent_io_pb2.AgentInfo:
    request = agent_io_pb2.GetAgentRequest(name=name)
    return host.agents.GetAgent(request, timeout=10).agent


def log_lines(host: HostProcess, agent: str, done: Callable[[list[Any]], bool]) -> list[Any]:
    """The agent's log (history, then followed) until ``done`` says enough has come."""
    request = supervisor_pb2.StreamLogsRequest(agent=agent, tail_lines=1000, follow=True)
    stream, lines = host.supervisor.StreamLogs(request, timeout=60), []
    try:
        for line in stream:
            lines.append(line)
            if done(lines):
                return lines
    finally:
        stream.cancel()
    raise AssertionError(f"{agent}: the log ended first")


# -- MCP servers as agents ------------------------------------------------------------------


def test_the_handshake_names_its_protocol_and_older_revisions_are_accepted(
    host: HostProcess, folder: Path
) -> None:
    """`initialize` (offered: 2025-11-25; accepted: 2024-11-05 to 2025-11-25): the replica is
    RUNNING, reason `MCP initialized (protocol V)`."""
    assert deploy_server(host, folder, "latest").reason == "MCP initialized (protocol 2025-11-25)"
    for version in ("2024-11-05", "2025-03-26"):  # and the fixture's raw: 2025-06-18
        name = f"old-{version}"
        event = deploy_server(host, folder, name, "old.py", version)
        assert (state_name(event.state), event.reason) == (
            "RUNNING",
            f"MCP initialized (protocol {version})",
        )


def test_instructions_version_and_title_describe_the_agent(host: HostProcess) -> None:
    """`serverInfo.version`; `instructions` -> `AgentInfo.version`; `description` when
    agent.toml gives none (this deploy has no agent.toml); tool `description` (else `title`)."""
    info = agent_info(host, "claims")
    assert (info.version, info.description) == ("4.5.6", "Claims of docs/interop.md.")
    titled = [action for action in info.actions if action.name == "titled"]
    assert [action.description for action in titled] == ["Only a title"]


def test_read_only_or_idempotent_hints_make_an_action_idempotent(host: HostProcess) -> None:
    """`annotations.idempotentHint` or `readOnlyHint` -> `ActionSpec.idempotent` ("a task
    retried after its process died"); another hint alone (destructiveHint) does not."""
    actions = {action.name: action for action in agent_info(host, "claims").actions}
    assert actions["lookup"].idempotent and actions["store"].idempotent
    assert not actions["launch"].idempotent
    # lookup kills its process the first time: read-only, it runs again on the restarted one.
    output = execute(host, "claims", "lookup", {"key": "k"}, timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    assert (data(output)["text"], output.metadata.attempt) == ("found k", 2)


def test_every_kind_of_content_block_is_kept_and_errors_carry_theirs(host: HostProcess) -> None:
    """`content` without `structuredContent` -> data {"content": [the blocks as MCP sends
    them], "text": the text blocks joined by newlines}; `isError` -> `error.details.content`."""
    got = data(execute(host, "claims", "blocks"))
    kinds = ["text", "image", "audio", "resource_link", "resource", "text"]
    assert [block["type"] for block in got["content"]] == kinds
    assert got["content"][1] == {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"}
    assert got["content"][4]["resource"] == {"uri": "memo://x", "text": "memo"}
    assert got["text"] == "one\ntwo"
    failed = execute(host, "claims", "smudge")
    assert (failed.status, failed.error.code) == (agent_io_pb2.TASK_STATUS_ERROR, "tool_error")
    assert failed.error.message == "one"  # the text blocks
    details = json_format.MessageToDict(failed.error.details)
    assert [block["type"] for block in details["content"]] == ["text", "image"]


def test_log_levels_and_stderr_reach_stream_logs(host: HostProcess) -> None:
    """`notifications/message` {level, logger, data} -> a StreamLogs line, source `log`, level
    (`notice` is info; `critical`, `alert`, `emergency` are error), `fields.logger`; stderr ->
    lines of source `stderr`."""
    assert data(execute(host, "claims", "levels"))["text"] == "logged"
    assert data(execute(host, "claims", "whisper", {"text": "psst 7"}))["text"] == "said"
    lines = log_lines(
        host,
        "claims",
        lambda seen: {"at emergency", "psst 7"} <= {line.message for line in seen},
    )
    logged = [line for line in lines if dict(line.fields).get("logger") == "levels"]
    assert {line.source for line in logged} == {"log"}
    assert {line.message.removeprefix("at "): line.level for line in logged} == {
        "debug": "debug",
        "info": "info",
        "notice": "info",
        "warning": "warning",
        "error": "error",
        "critical": "error",
        "alert": "error",
        "emergency": "error",
    }
    by_message = {line.message: line for line in lines}
    assert by_message["psst 7"].source == "stderr"


@pytest.mark.parametrize("mode", ["polite", "stubborn", "deaf"])
def test_a_stop_closes_stdin_then_signals(host: HostProcess, folder: Path, mode: str) -> None:
    """stdin closed, then SIGTERM, SIGKILL (MCP's stdio shutdown) for StopAgent: a server that
    exits at stdin's end gets no signal (its grace is long); one that stays is sent SIGTERM
    after its stop_grace; one that ignores SIGTERM too is killed all the same."""
    grace = duration_pb2.Duration(seconds=30 if mode == "polite" else 1)
    running = deploy_server(host, folder, mode, "server.py", str(folder), mode, stop_grace=grace)
    assert state_name(running.state) == "RUNNING", running.reason
    host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name=mode), timeout=60)
    stopped = watch_until(host, mode, {"STOPPED"}, after=running.sequence)
    notes = (folder / f"{mode}.notes").read_text().splitlines()
    signalled = mode != "polite"
    assert notes == ["stdin closed", *(["SIGTERM"] if signalled else [])], stopped.reason
    listed = supervisor_pb2.ListProcessesRequest(agent=mode)
    [process] = host.supervisor.ListProcesses(listed, timeout=10).processes
    # The deaf one ends by SIGKILL, the others by exiting on their own (from SIGTERM's handler).
    ended = ("signal", process.last_signal) if mode == "deaf" else ("exit", process.last_exit_code)
    assert ended == (("signal", signal.SIGKILL) if mode == "deaf" else ("exit", 0))


# -- Ether agents as MCP tools --------------------------------------------------------------


def run(coroutine: Any) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(120):
            return await coroutine

    return anyio.run(bounded)


@pytest.mark.parametrize("surface", SURFACES)
def test_titles_hints_and_schemas_of_the_tools(host: HostProcess, surface: str) -> None:
    """`title` -> `AGENT: ACTION`; `annotations.idempotentHint` -> the action's `idempotent`
    (an MCP tool's readOnlyHint included); `inputSchema` {"type": "object"} when the action has
    none; a result schema that is not an object's is wrapped as {"result": ...}."""

    async def listed() -> dict[str, types.Tool]:
        async with mcp_session(surface, host) as session:
            return {tool.name: tool for tool in (await session.list_tools()).tools}

    tools = run(listed())
    assert tools["calculator__add"].title == "calculator: add"
    hints = {name: tools[name].annotations.idempotent_hint for name in tools}
    assert hints["calculator__add"] and hints["claims__lookup"] and hints["claims__store"]
    assert hints["calculator__count"] is False and hints["claims__launch"] is False
    assert tools["raw__numbers"].input_schema == {"type": "object"}
    assert tools["raw__numbers"].output_schema == {
        "type": "object",
        "properties": {"result": {"type": "array"}},
        "required": ["result"],
    }


@pytest.mark.parametrize("surface", SURFACES)
def test_content_text_and_meta_of_results(host: HostProcess, surface: str) -> None:
    """`content`: one text block, `data` as indented JSON; `_meta`: `ether/status` (SUCCESS,
    PARTIAL, ERROR), `ether/task_id`, and on errors `ether/error_code` (the gRPC status name of
    a refusal)."""

    async def called() -> list[types.CallToolResult]:
        async with mcp_session(surface, host) as session:
            return [
                await session.call_tool("flow__context", {}),
                await session.call_tool("halfway__gather", {"topic": surface, "complete": False}),
                await session.call_tool("calculator__add", {"a": 1}),
            ]

    context, partial, refused = run(called())
    assert context.structured_content is not None and context.meta is not None
    [text] = context.content
    assert text.text == json.dumps(context.structured_content, indent=2)
    assert context.meta["ether/status"] == "SUCCESS" and "ether/error_code" not in context.meta
    assert context.meta["ether/task_id"] == context.structured_content["task_id"]
    assert partial.meta is not None and partial.meta["ether/status"] == "PARTIAL"
    assert partial.structured_content is not None
    assert partial.structured_content["topic"] == surface
    assert refused.is_error and refused.meta is not None
    assert refused.meta["ether/status"] == "ERROR"
    assert refused.meta["ether/error_code"] == grpc.StatusCode.INVALID_ARGUMENT.name
