"""The concierge example: a gateway agent that answers by calling scout and fills the context."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import gateway_pb2
from tests.support.agents import EXAMPLES, deploy
from tests.support.host import ROOT, HostProcess

from ._support import Conversation, of, open_session, reply_text


@pytest.fixture(scope="module")
def concierge(host: HostProcess) -> str:
    deploy(host, EXAMPLES / "scout")
    return deploy(host, EXAMPLES / "concierge")


def test_concierge_answers_from_scout_and_writes_findings(
    host: HostProcess, concierge: str
) -> None:
    session = open_session(host, capability="concierge")
    assert session.agent == concierge
    talk = Conversation(host, session.id)
    folder = talk.turn("What is in examples/agents/scout?")
    readme = talk.turn("Tell me about README.md")
    talk.close()
    files = sorted(
        p.name
        for p in (ROOT / "examples/agents/scout").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert reply_text(folder).startswith(f"examples/agents/scout holds {len(files)} files")
    assert "agent.py" in reply_text(folder)
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert reply_text(readme).startswith(f"README.md is a markdown file of {lines} lines (")
    [ready] = of(folder, "custom")
    assert ready.type == "findings_ready" and ready.agent == concierge
    assert [p.message for p in of(folder, "progress")] == [
        "exploring examples/agents/scout",
        "done",
    ]
    context = host.gateway.GetContext(
        gateway_pb2.GetContextRequest(session_id=session.id), timeout=10
    )
    document = json_format.MessageToDict(context.context)
    assert document["findings"]["examples/agents/scout"]["files"] == len(files)
    assert document["findings"]["README.md"]["lines"] == lines
    assert (document["questions"], document["last_question"]) == (2, "Tell me about README.md")


def test_concierge_stays_inside_the_repository(host: HostProcess, concierge: str) -> None:
    talk = Conversation(host, open_session(host, agent=concierge).id)
    outside = talk.turn("What is in ../../../etc ?")
    talk.close()
    assert reply_text(outside).startswith("Ask me about a folder or a file of this repository")
    assert not of(outside, "context_changed")


def test_concierge_is_a_gateway_agent(host: HostProcess, concierge: str) -> None:
    with pytest.raises(grpc.RpcError) as error:
        open_session(host, agent="scout")
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
