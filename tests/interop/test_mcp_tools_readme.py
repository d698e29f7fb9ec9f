"""The README's "As MCP tools": its MCP client configuration runs as written (the checkout's
path and the test host's address put in), and its /mcp URL is the HTTP listener make run
serves."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator

import pytest
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.agents import deploy
from tests.support.host import ROOT, HostProcess

from .test_mcp_tools import CALCULATOR, run

README_ADDRESS = "127.0.0.1:50051"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("mcp-readme"), http=True)
    try:
        process.wait_serving()
        deploy(process, CALCULATOR)
        yield process
    finally:
        process.stop()


def _readme_config() -> dict[str, object]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- mcp-client:start -->\n```json\n(.*?)```", text, re.S)
    assert block, "README.md lost its mcp-client block"
    config: dict[str, object] = json.loads(block.group(1))
    return config


def test_the_readme_mcp_client_configuration(host: HostProcess) -> None:
    server = _readme_config()["mcpServers"]["ether"]  # type: ignore[index]
    command = server["command"].replace("/path/to/ether", str(ROOT))
    args = [host.address if a == README_ADDRESS else a for a in server["args"]]
    assert args != server["args"], "the README's address was not found in its args"

    async def listed() -> set[str]:
        parameters = StdioServerParameters(command=command, args=args)
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return {tool.name for tool in (await s.list_tools()).tools}

    assert "calculator__add" in run(listed())


def test_the_readme_mcp_url_is_make_runs_http_listener(host: HostProcess) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    url = re.search(r"`(http://[\d.:]+/mcp)`", text)
    assert url, "README.md names no /mcp URL"
    served = tomllib.loads((ROOT / "examples" / "ether.toml").read_text())["http_listen"]
    assert url.group(1) == f"http://{served}/mcp"
    port = served.rpartition(":")[2]
    local = url.group(1).replace(f":{port}/", f":{host.http_address.rpartition(':')[2]}/")

    async def listed() -> set[str]:
        async with (
            streamable_http_client(local) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return {tool.name for tool in (await session.list_tools()).tools}

    assert "calculator__add" in run(listed())
