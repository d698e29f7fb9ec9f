"""Ether agents as MCP tools, driven by the official TypeScript SDK's client
(tests/interop/mcp_client_ts, @modelcontextprotocol/sdk pinned) through both fronts: list,
call with progress, a tool error, a cancelled call the agent sees end, and
tools/list_changed after a deploy."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ether.v1 import supervisor_pb2
from tests.support.agents import deploy
from tests.support.host import ETHER, HostProcess

from .mcp_clients import SURFACES
from .test_mcp_tools import BUDGET, CALCULATOR

CLIENT = Path(__file__).parent / "mcp_client_ts" / "dist" / "client.js"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    assert CLIENT.exists(), f"{CLIENT} is missing: run make setup (npm ci builds it)"
    process = HostProcess(tmp_path_factory.mktemp("mcp-tools-ts"), http=True)
    try:
        process.wait_serving()
        deploy(process, CALCULATOR)
        yield process
    finally:
        process.stop()


@pytest.mark.parametrize("surface", SURFACES)
def test_the_typescript_sdk_client(host: HostProcess, surface: str) -> None:
    target = [str(ETHER), host.address] if surface == "stdio" else [f"{host.http_address}/mcp"]
    logs = host.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent="calculator", tail_lines=0, follow=True),
        timeout=BUDGET * 3,
    )
    node = shutil.which("node")
    assert node, "node is not on PATH"
    client = subprocess.Popen(
        [node, str(CLIENT), surface, *target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    steps: dict[str, Any] = {}
    name = f"ts-abacus-{surface}"
    try:
        assert client.stdout is not None
        for line in client.stdout:
            record = json.loads(line)
            steps[record["step"]] = record["value"]
            if record["step"] == "waiting":
                deploy(host, CALCULATOR, name=name)
        assert client.wait(BUDGET) == 0, client.stderr.read() if client.stderr else ""
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()

    assert steps["capabilities"]["tools"] == {"listChanged": True}
    tools = {tool["name"]: tool for tool in steps["tools"]}
    assert tools["calculator__add"]["inputSchema"]["required"] == ["a", "b"]
    counted = steps["count"]
    assert counted["result"]["structuredContent"] == {"counted": 3}
    # The TypeScript SDK runs notification handlers a microtask later than it settles a response:
    # progress read in the same chunk as the result is dropped on its side (its "unknown token"),
    # so it sees the first steps, in order, and maybe not the last ones.
    seen = [report["progress"] for report in counted["progress"]]
    assert seen and seen == [1, 2, 3][: len(seen)], seen
    assert counted["progress"][0] == {"progress": 1, "total": 3, "message": "step 1 of 3"}
    refused = steps["refuse"]
    assert refused["isError"] is True
    assert refused["content"] == [{"type": "text", "text": "not today"}]
    assert steps["cancel"].startswith("rejected:")
    assert f"{name}__add" in steps["changed"]
    try:
        for line in logs:  # the agent saw its task cancelled
            if line.message == "wait cancel-ts was cancelled":
                break
        else:
            raise AssertionError("the agent never saw its task cancelled")
    finally:
        logs.cancel()
