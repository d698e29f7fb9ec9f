"""The Go and TypeScript SDKs' typed host calls (term.run, msg.send/receive, on_message) against
a real host: the wire contract the Python SDK defines (ether_agent.gateway, .terminal)."""

from __future__ import annotations

import pytest

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, execute
from tests.support.host import HostProcess

GO = "gohostcalls"
TS = "tshostcalls"


@pytest.fixture(scope="module", autouse=True)
def agents(host: HostProcess) -> None:
    deploy(host, AGENTS / "go_hostcalls")
    deploy(host, AGENTS / "ts_hostcalls")


def ok(host: HostProcess, agent: str, action: str, params: dict | None = None) -> dict:
    output = execute(host, agent, action, params or {}, timeout=30)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    result: dict = data(output)
    return result


@pytest.mark.parametrize(("agent", "lang"), [(GO, "go"), (TS, "ts")])
def test_term_run_returns_the_output(host: HostProcess, agent: str, lang: str) -> None:
    result = ok(host, agent, "run", {"command": f"echo hello-from-{lang}"})
    assert f"hello-from-{lang}" in result["output"]
    assert result["reason"] == "exit"
    assert result["exit_code"] == 0


def test_go_sends_itself_a_message_and_receives_it(host: HostProcess) -> None:
    result = ok(host, GO, "roundtrip", {"data": {"n": 7}})
    [message] = result["messages"]
    assert message["sender"] == f"agent:{GO}"
    assert message["type"] == "echo"
    assert message["data"] == {"n": 7}


def test_typescript_sends_go_receives(host: HostProcess) -> None:
    sent = ok(host, TS, "send", {"agent": GO, "type": "hello", "data": {"from": "ts"}})
    assert sent["sender"] == f"agent:{TS}"
    result = ok(host, GO, "receive", {"wait": 5})
    [message] = result["messages"]
    assert message["id"] == sent["id"]
    assert message["sender"] == f"agent:{TS}"
    assert message["data"] == {"from": "ts"}


def test_go_sends_typescript_on_message_handles(host: HostProcess) -> None:
    sent = ok(host, GO, "send", {"agent": TS, "type": "ping", "data": {"from": "go"}})
    # The action returns once the handler has seen that id (or fails at its deadline).
    seen = ok(host, TS, "handled", {"id": sent["id"]})["messages"]
    [message] = [m for m in seen if m["id"] == sent["id"]]
    assert message["sender"] == f"agent:{GO}"
    assert message["type"] == "ping"
    assert message["data"] == {"from": "go"}
