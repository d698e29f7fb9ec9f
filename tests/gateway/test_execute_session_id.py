"""A session id in a plain Execute request: no way into someone's session (docs/gateway.md,
"Context": only tasks the gateway starts for a session may use ``ctx.*`` on it)."""

from __future__ import annotations

import time

import pytest
from google.protobuf import json_format

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import execute
from tests.support.host import HostProcess

from ._support import Conversation, kinds, open_session, reply_text


@pytest.fixture(scope="module")
def chatter(host: HostProcess) -> str:
    return deploy(host, AGENTS / "chatter")


def test_a_session_id_in_execute_grants_no_access_to_the_session(
    host: HostProcess, chatter: str
) -> None:
    """A client that knows a session's id and puts it in an Execute request cannot make an agent
    write that session's context or push events into its stream: each ctx.* call is refused,
    and the session's context, version and events stay as they were."""
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


def test_a_task_started_first_under_a_guessed_turn_id_cannot_fail_the_turn(
    host: HostProcess, chatter: str
) -> None:
    """A turn's task ids are not derived from the session's id alone: a client that knows the
    session and starts a task first under the id the next turn's step would take (session,
    turn number, step name) does not make that turn fail with DUPLICATE_TASK_ID."""
    session = open_session(host, agent=chatter)
    guessed = agent_io_pb2.AgentInput(
        agent=chatter,
        action="respond",
        params_json=b'{"message": {"text": "hang"}, "turn": 1}',
        task_id=f"{session.id}.1.reply",
    )
    squatter = host.agents.Execute.future(agent_io_pb2.ExecuteRequest(input=guessed), timeout=60)
    try:
        deadline = time.monotonic() + 30
        while not _in_flight(host, chatter):  # the squatter's task runs under that id
            assert time.monotonic() < deadline and not squatter.done(), squatter
        talk = Conversation(host, session.id)
        try:
            turn = talk.turn("hello")
        finally:
            talk.close()
        assert kinds(turn)[-1] == "turn_completed", kinds(turn)
        assert reply_text(turn) == "chatter heard: hello"
    finally:
        squatter.cancel()


def _in_flight(host: HostProcess, agent: str) -> int:
    request = agent_io_pb2.GetAgentRequest(name=agent)
    return int(host.agents.GetAgent(request, timeout=10).agent.in_flight)
