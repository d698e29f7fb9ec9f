"""A session id in a plain Execute request: no way into someone's session (docs/gateway.md,
"Context": only tasks the gateway starts for a session may use ``ctx.*`` on it)."""

from __future__ import annotations

from google.protobuf import json_format

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import execute
from tests.support.host import HostProcess

from ._support import open_session


def test_a_session_id_in_execute_grants_no_access_to_the_session(host: HostProcess) -> None:
    """A client that knows a session's id and puts it in an Execute request cannot make an agent
    write that session's context or push events into its stream: each ctx.* call is refused,
    and the session's context, version and events stay as they were."""
    chatter = deploy(host, AGENTS / "chatter")
    session = open_session(host, agent=chatter, context={"topic": "tea"})
    for command in ("remember topic coffee", "emit scam_warning"):  # ctx.put, then ctx.emit
        output = execute(
            host,
            chatter,
            "respond",
            {"message": {"text": command}, "turn": 1},
            context=agent_io_pb2.TaskContext(session_id=session.id),
        )
        assert output.status == agent_io_pb2.TASK_STATUS_ERROR, command
        assert output.error.code == "session_not_found", (command, output.error)
    context = host.gateway.GetContext(
        gateway_pb2.GetContextRequest(session_id=session.id), timeout=10
    )
    assert json_format.MessageToDict(context.context) == {"topic": "tea"}
    assert context.version == 1
    got = host.gateway.GetSession(
        gateway_pb2.GetSessionRequest(session_id=session.id), timeout=10
    ).session
    assert (got.context_version, got.last_sequence, got.turns) == (1, 0, 0)
