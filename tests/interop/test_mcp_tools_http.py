"""``/mcp`` under the host's auth, and its calls drained when the host stops."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import mcp_types as types
import pytest

from tests.support.agents import deploy
from tests.support.host import HostProcess

from .mcp_clients import mcp_session
from .test_mcp_tools import CALCULATOR, run

ADMIN = "mcp-admin-token-0123456789"
RUNNER = "mcp-runner-token-0123456789"  # may run the calculator only
READER = "mcp-reader-token-0123456789"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
ACCEPT = {"accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    folder = tmp_path_factory.mktemp("mcp-auth")
    tokens = folder / "tokens"
    tokens.write_text(
        f"admin {ADMIN}\nrunner {RUNNER} agent.execute:calculator,agent.read\n"
        f"reader {READER} agent.read\n"
    )
    tokens.chmod(0o600)
    process = HostProcess(folder / "state", "--auth-tokens-file", str(tokens), http=True)
    try:
        process.wait_serving()
        admin = (("authorization", f"Bearer {ADMIN}"),)
        deploy(process, CALCULATOR, metadata=admin)
        deploy(process, CALCULATOR, name="abacus", metadata=admin)
        yield process
    finally:
        process.stop()


def test_no_token_or_no_execute_right_is_refused(host: HostProcess) -> None:
    url = f"{host.http_address}/mcp"
    missing = httpx.post(url, json=INITIALIZE, headers=ACCEPT, timeout=30)
    assert missing.status_code == 401
    assert "missing bearer token" in missing.json()["error"]["message"]
    reader = ACCEPT | {"authorization": f"Bearer {READER}"}
    denied = httpx.post(url, json=INITIALIZE, headers=reader, timeout=30)
    assert denied.status_code == 403
    assert denied.json()["error"]["metadata"]["right"] == "agent.execute"


def test_a_token_sees_and_calls_only_the_agents_it_may_run(host: HostProcess) -> None:
    async def exchange() -> tuple[list[str], types.CallToolResult, Exception]:
        async with mcp_session("http", host, token=RUNNER) as session:
            names = [tool.name for tool in (await session.list_tools()).tools]
            added = await session.call_tool("calculator__add", {"a": 2, "b": 3})
            try:
                await session.call_tool("abacus__add", {"a": 2, "b": 3})
            except Exception as error:
                return names, added, error
            raise AssertionError("abacus__add ran without agent.execute on abacus")

    names, added, refused = run(exchange())
    assert "calculator__add" in names
    assert not [name for name in names if name.startswith("abacus__")]
    assert added.structured_content == {"sum": 5}
    assert "Unknown tool: abacus__add" in str(refused)


def test_ether_mcp_answers_a_call_without_the_right_with_a_tool_error(host: HostProcess) -> None:
    """Over gRPC ``ether mcp`` cannot ask which agents a token may run: it lists what the token
    may read, and a call the host refuses comes back as a tool error naming the right."""

    async def exchange() -> types.CallToolResult:
        async with mcp_session("stdio", host, token=RUNNER) as session:
            assert "abacus__add" in {tool.name for tool in (await session.list_tools()).tools}
            return await session.call_tool("abacus__add", {"a": 2, "b": 3})

    refused = run(exchange())
    assert refused.is_error
    assert "lacks the agent.execute right for 'abacus'" in refused.content[0].text


def test_a_call_in_flight_finishes_when_the_host_stops(tmp_path: Path) -> None:
    """SIGTERM while a tools/call runs: the listener stops taking connections and the call
    still gets its result (MCP over plain HTTP here: the SDK client would keep reopening its
    event stream to a host that is going away)."""
    host = HostProcess(tmp_path / "state", "--shutdown-grace", "60", http=True)
    try:
        host.wait_serving()
        deploy(host, CALCULATOR)
        url = f"{host.http_address}/mcp"
        with httpx.Client(timeout=60) as client:
            opened = client.post(url, json=INITIALIZE, headers=ACCEPT)
            session = ACCEPT | {"mcp-session-id": opened.headers["mcp-session-id"]}
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert client.post(url, json=done, headers=session).status_code == 202
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "calculator__linger",
                    "arguments": {"ms": 1500},
                    "_meta": {"progressToken": "p"},
                },
            }
            messages = []
            with client.stream("POST", url, json=call, headers=session) as answer:
                for line in answer.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    message = json.loads(line.removeprefix("data:"))
                    messages.append(message)
                    if message.get("method") == "notifications/progress" and len(messages) == 1:
                        host.process.send_signal(signal.SIGTERM)  # the task runs on the agent
                    if message.get("id") == 2:
                        break
        assert messages[0]["method"] == "notifications/progress"
        assert messages[-1]["result"]["structuredContent"] == {"lingered": 1500}
        assert host.process.wait(60) == 0
        host.wait_for_log(lambda r: r.get("event") == "stopped")
    finally:
        host.stop()


def test_a_session_answers_only_the_identity_that_opened_it(host: HostProcess) -> None:
    url = f"{host.http_address}/mcp"
    runner = ACCEPT | {"authorization": f"Bearer {RUNNER}"}
    opened = httpx.post(url, json=INITIALIZE, headers=runner, timeout=30)
    assert opened.status_code == 200
    session = {"mcp-session-id": opened.headers["mcp-session-id"]}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    admin = ACCEPT | session | {"authorization": f"Bearer {ADMIN}"}
    assert httpx.post(url, json=listing, headers=admin, timeout=30).status_code == 404
