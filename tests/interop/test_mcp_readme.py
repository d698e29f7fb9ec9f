"""The README's MCP example (between the `mcp` markers), run verbatim against a real host with
the example agent examples/agents/mcp_everything (the published MCP reference server) deployed
as `make run` deploys it: only the address changes."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.host._support import README_ADDRESS, readme_commands
from tests.support.agents import EXAMPLES, deploy
from tests.support.host import ROOT, TOOLS, HostProcess


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("mcp-readme"))
    try:
        process.wait_serving()
        deploy(process, EXAMPLES / "mcp_everything")
        yield process
    finally:
        process.stop()


def run(command: str, address: str) -> list[dict[str, object]]:
    """Run one README line as a user would; grpcurl's JSON messages, one per response."""
    assert README_ADDRESS in command
    env = os.environ | {"PATH": f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-c", command.replace(README_ADDRESS, address)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    decoder, text, messages = json.JSONDecoder(), done.stdout.strip(), []
    while text:
        message, end = decoder.raw_decode(text)
        messages.append(message)
        text = text[end:].strip()
    return messages


def test_the_readme_mcp_calls_run_verbatim(host: HostProcess) -> None:
    total, structured, stream = readme_commands("mcp")
    [answer] = run(total, host.address)
    assert answer["output"]["status"] == "TASK_STATUS_SUCCESS"  # type: ignore[index]
    assert answer["output"]["data"]["text"] == "The sum of 2 and 40 is 42."  # type: ignore[index]
    [weather] = run(structured, host.address)
    assert set(weather["output"]["data"]) == {"temperature", "conditions", "humidity"}  # type: ignore[index]
    events = run(stream, host.address)
    progress = [e["progress"] for e in events if "progress" in e]
    assert progress == [{"progress": p, "total": 3} for p in (1, 2, 3)]
    assert events[-1]["output"]["status"] == "TASK_STATUS_SUCCESS"  # type: ignore[index]
