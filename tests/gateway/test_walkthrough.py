"""The conversation in docs/gateway.md, run verbatim against a real host (only the address changes)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tests.support.agents import EXAMPLES, deploy
from tests.support.host import ROOT, TOOLS, HostProcess

DOC = ROOT / "docs" / "gateway.md"
DOC_ADDRESS = "127.0.0.1:50051"


def commands() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(
        r"<!-- gateway:start -->\n\s*```sh\n(.*?)```\s*<!-- gateway:end -->", text, re.DOTALL
    )
    assert found, "docs/gateway.md has no gateway block"
    joined = found.group(1).replace("\\\n", " ")
    return [
        line.strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")
    ]


@pytest.fixture(scope="module")
def demo(host: HostProcess) -> HostProcess:
    deploy(host, EXAMPLES / "scout")
    deploy(host, EXAMPLES / "concierge")
    return host


def run(command: str, address: str) -> subprocess.CompletedProcess[str]:
    assert DOC_ADDRESS in command
    env = os.environ | {"PATH": f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["bash", "-c", command.replace(DOC_ADDRESS, address)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
        check=False,
    )


def test_the_documented_conversation_runs(demo: HostProcess) -> None:
    chat, grpcurl_conversation, listed = commands()
    said = run(chat, demo.address)
    assert said.returncode == 0, said.stderr
    assert "concierge: examples/agents/scout holds " in said.stdout
    assert "concierge: README.md is a markdown file of" in said.stdout
    assert "[findings_ready from concierge]" in said.stdout
    talked = run(grpcurl_conversation, demo.address)
    assert talked.returncode == 0, talked.stderr
    assert '"stepCompleted"' in talked.stdout and re.search(r"match(es)? 'TODO'", talked.stdout)
    context = json.loads(talked.stdout[talked.stdout.rindex('{\n  "context"') :])
    assert context["context"]["user"] == "ada" and "server" in context["context"]["findings"]
    sessions = run(listed, demo.address)
    assert sessions.returncode == 0, sessions.stderr
    assert len(json.loads(sessions.stdout)["sessions"]) == 2
