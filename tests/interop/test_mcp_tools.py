"""Ether agents as MCP tools, driven by the official MCP Python client through both fronts:
``ether mcp`` (stdio, a gRPC client of the host) and ``/mcp`` (Streamable HTTP on the HTTP
listener, over the core). Same names, schemas, results, progress, cancellation and
tools/list_changed on both."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from google.protobuf import json_format
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import listen
from mcp.shared.subscriptions import ToolsListChanged

from ether.v1 import agent_io_pb2, supervisor_pb2
from ether_host.mcp_tools import ActionTool, name_tools
from tests.support.agents import deploy, remove_agent
from tests.support.host import ETHER, HostProcess

from .mcp_clients import SURFACES, mcp_session

CALCULATOR = Path(__file__).parent / "agents" / "calculator"
BUDGET = 60  # seconds any one exchange may take on a loaded machine; a hang fails, not waits


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("mcp-tools"), http=True)
    try:
        process.wait_serving()
        deploy(process, CALCULATOR)
        yield process
    finally:
        process.stop()


def run(coroutine: Any) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(BUDGET * 2):
            return await coroutine

    return anyio.run(bounded)


@pytest.mark.parametrize("surface", SURFACES)
def test_every_action_is_a_tool_with_its_params_schema(host: HostProcess, surface: str) -> None:
    async def listed() -> dict[str, types.Tool]:
        async with mcp_session(surface, host) as session:
            return {tool.name: tool for tool in (await session.list_tools()).tools}

    tools = run(listed())
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="calculator"), timeout=10).agent
    for action in info.actions:
        tool = tools[f"calculator__{action.name}"]
        assert tool.input_schema == json_format.MessageToDict(action.params_schema)
        assert tool.description == action.description
        assert tool.output_schema is None  # the Python SDK declares no result schemas
    assert tools["calculator__add"].annotations.idempotent_hint is True


@pytest.mark.parametrize("surface", SURFACES)
def test_a_call_returns_structured_content_and_reports_progress(
    host: HostProcess, surface: str
) -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async def called() -> tuple[types.CallToolResult, types.CallToolResult]:
        async with mcp_session(surface, host) as session:
            counted = await session.call_tool(
                "calculator__count", {"n": 3}, progress_callback=on_progress
            )
            greeted = await session.call_tool("calculator__greet", {"name": "Ada"})
            return counted, greeted

    counted, greeted = run(called())
    assert not counted.is_error
    assert counted.structured_content == {"counted": 3}
    assert json.loads(counted.content[0].text) == {"counted": 3}
    assert counted.meta is not None and counted.meta["ether/status"] == "SUCCESS"
    assert reports == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]
    # A result that is not an object travels wrapped; its text is the string itself.
    assert greeted.structured_content == {"result": "Hello, Ada!"}
    assert greeted.content[0].text == "Hello, Ada!"


@pytest.mark.parametrize("surface", SURFACES)
def test_errors_are_tool_errors_with_the_ether_message(host: HostProcess, surface: str) -> None:
    async def called() -> tuple[types.CallToolResult, types.CallToolResult, Exception]:
        async with mcp_session(surface, host) as session:
            failed = await session.call_tool("calculator__refuse", {"message": "not today"})
            invalid = await session.call_tool("calculator__add", {"a": 1})
            try:
                await session.call_tool("calculator__divide", {})
            except Exception as error:
                return failed, invalid, error
            raise AssertionError("an unknown tool was called")

    failed, invalid, unknown = run(called())
    assert failed.is_error
    assert failed.content[0].text == "not today"
    assert failed.meta is not None and failed.meta["ether/error_code"] == "refused"
    assert invalid.is_error  # params failing the schema: the model can read why and retry
    assert "'b' is a required property" in invalid.content[0].text
    assert "Unknown tool: calculator__divide" in str(unknown)


@pytest.mark.parametrize("surface", SURFACES)
def test_cancelling_a_call_cancels_the_agents_task(host: HostProcess, surface: str) -> None:
    logs = host.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent="calculator", tail_lines=0, follow=True),
        timeout=BUDGET,
    )
    label = f"cancel-{surface}"

    async def cancelled() -> None:
        waiting = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            waiting.set()

        async with mcp_session(surface, host) as session, anyio.create_task_group() as tg:

            async def call() -> None:
                await session.call_tool(
                    "calculator__wait", {"label": label}, progress_callback=on_progress
                )
                raise AssertionError("the wait ended without being cancelled")

            tg.start_soon(call)
            await waiting.wait()  # the agent runs the task now
            tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled

    run(cancelled())
    saw_cancelled(logs, label)


def saw_cancelled(logs: Any, label: str) -> None:
    """Read the calculator's StreamLogs (``logs``, following) until its ``wait LABEL`` task
    says it was cancelled, then end the stream."""
    try:
        for line in logs:
            if line.message == f"wait {label} was cancelled":
                return
        raise AssertionError("the agent never saw its task cancelled")
    finally:
        logs.cancel()


@pytest.mark.parametrize("surface", SURFACES)
def test_tools_list_changed_when_agents_come_and_go(host: HostProcess, surface: str) -> None:
    name = f"abacus-{surface}"

    async def followed() -> tuple[list[str], list[str]]:
        changed = anyio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                changed.set()

        async with mcp_session(surface, host, message_handler=on_message) as session:
            assert f"{name}__add" not in {t.name for t in (await session.list_tools()).tools}
            await anyio.to_thread.run_sync(lambda: deploy(host, CALCULATOR, name=name))
            await changed.wait()
            after_deploy = [t.name for t in (await session.list_tools()).tools]
            changed = anyio.Event()
            await anyio.to_thread.run_sync(lambda: remove_agent(host, name))
            await changed.wait()
            after_remove = [t.name for t in (await session.list_tools()).tools]
            return after_deploy, after_remove

    after_deploy, after_remove = run(followed())
    assert f"{name}__add" in after_deploy
    assert not [tool for tool in after_remove if tool.startswith(f"{name}__")]


PY_SERVER = Path(__file__).parent / "mcp_servers_py"  # an MCP server deployed as an agent


@pytest.mark.parametrize("surface", SURFACES)
def test_a_declared_result_schema_is_the_tools_output_schema(
    host: HostProcess, surface: str
) -> None:
    """An MCP server deployed as an agent declares result schemas (its tools' outputSchema):
    they come back out as outputSchema, and its unusable tool is not offered."""
    if "pytools" not in {a.name for a in host.agents.ListAgents(_LIST, timeout=10).agents}:
        deploy(host, PY_SERVER)
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="pytools"), timeout=10).agent
    declared = {a.name: json_format.MessageToDict(a.result_schema) for a in info.actions}
    assert declared["add"], "the MCP server's add tool declares an output schema"

    async def listed() -> tuple[dict[str, types.Tool], types.CallToolResult]:
        async with mcp_session(surface, host) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            # The SDK client checks structuredContent against the outputSchema it listed.
            return tools, await session.call_tool("pytools__add", {"a": 2, "b": 3})

    tools, added = run(listed())
    assert tools["pytools__add"].output_schema == declared["add"]
    assert tools["pytools__echo"].output_schema is None
    assert "pytools__broken" not in tools
    assert not added.is_error
    assert added.structured_content == {"total": 5, "terms": [2, 3]}


_LIST = agent_io_pb2.ListAgentsRequest()


def test_tool_names_are_stable_safe_and_unique() -> None:
    """The naming rule of docs/interop.md: AGENT__ACTION; other characters become '_', and a
    changed, overlong or colliding name gets a hash suffix that depends on the pair alone."""
    long_action = "a" * 80
    named = name_tools(
        [
            ActionTool("scout", "analyze_file"),
            ActionTool("web", "get.page"),
            ActionTool("web", "get_page"),
            ActionTool("scout", long_action),
            ActionTool("a__b", "c"),
            ActionTool("a", "b__c"),
        ]
    )
    names = {(tool.agent, tool.action): name for name, tool in named.items()}
    assert names[("scout", "analyze_file")] == "scout__analyze_file"
    assert names[("web", "get_page")] == "web__get_page"
    assert names[("web", "get.page")].startswith("web__get_page_")  # changed: suffixed
    assert len(names[("scout", long_action)]) == 64
    assert {names[("a__b", "c")], names[("a", "b__c")]} >= {"a__b__c"}
    assert len(set(names.values())) == 6
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) for name in names.values())
    again = name_tools([ActionTool("scout", long_action)])
    assert list(again) == [names[("scout", long_action)]]  # the same name in any listing


def test_without_auth_only_loopback_host_headers_reach_mcp(host: HostProcess) -> None:
    """A page from another origin cannot drive a loopback /mcp through DNS rebinding."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"accept": "application/json, text/event-stream"}
    url = f"{host.http_address}/mcp"
    assert httpx.post(url, json=body, headers=accept, timeout=30).status_code == 200
    rebound = accept | {"host": "attacker.example"}
    assert httpx.post(url, json=body, headers=rebound, timeout=30).status_code == 421


@pytest.mark.parametrize("surface", SURFACES)
def test_a_2026_client_lists_and_calls_too(host: HostProcess, surface: str) -> None:
    """A client of the 2026-07-28 revision (server/discover instead of initialize, what the
    SDK's Client does by default) lists and calls the same tools."""

    async def exchange() -> tuple[str, set[str], types.CallToolResult]:
        async with _discovered(surface, host) as session:
            result = session.discover_result
            assert result is not None
            names = {tool.name for tool in (await session.list_tools()).tools}
            added = await session.call_tool("calculator__add", {"a": 2, "b": 3})
            return session.protocol_version, names, added

    version, names, added = run(exchange())
    assert version == "2026-07-28"
    assert "calculator__add" in names
    assert added.structured_content == {"sum": 5}


@asynccontextmanager
async def _discovered(surface: str, host: HostProcess) -> AsyncIterator[ClientSession]:
    if surface == "stdio":
        server = StdioServerParameters(command=str(ETHER), args=["mcp", "--address", host.address])
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.discover()
            yield session
        return
    async with (
        streamable_http_client(f"{host.http_address}/mcp") as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.discover()
        yield session


@pytest.mark.parametrize("surface", SURFACES)
def test_a_2026_client_hears_of_changes_on_its_listen_stream(
    host: HostProcess, surface: str
) -> None:
    name = f"tally-{surface}"

    async def followed() -> tuple[object, set[str]]:
        async with (
            _discovered(surface, host) as session,
            listen(session, tools_list_changed=True) as subscription,
        ):
            await anyio.to_thread.run_sync(lambda: deploy(host, CALCULATOR, name=name))
            event = await subscription.__anext__()
            return event, {tool.name for tool in (await session.list_tools()).tools}

    event, names = run(followed())
    assert isinstance(event, ToolsListChanged)
    assert f"{name}__add" in names


def test_ether_mcp_says_which_host_it_cannot_reach() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"

    async def listed() -> Exception:
        server = StdioServerParameters(command=str(ETHER), args=["mcp", "--address", address])
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            try:
                await session.list_tools()
            except Exception as error:
                return error
        raise AssertionError("tools were listed from a host that is not there")

    error = str(run(listed()))
    assert f"the Ether host at {address} did not list its agents: UNAVAILABLE" in error
