"""Gateway calls that overlap on one session or mailbox (docs/gateway.md, "Sessions" and
"Messages and topics"): repeats of one request_id at once, two Converse streams sending at
once, and a CloseSession while a turn runs with more queued behind it.

Each of these is decided in one step of the event loop (the session's or mailbox's state is
checked and changed with no await between), so they hold however the calls interleave; these
tests send the calls together and check what each answered and what the session shows.
"""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest

from ether.v1 import gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess
from tests.workflows.runs import logged

from ._support import Conversation, kinds


@pytest.fixture(scope="module")
def agents(host: HostProcess) -> tuple[str, str]:
    """The chatter gateway agent and the flow agent (whose hold logs the cancel it gets)."""
    return deploy(host, AGENTS / "chatter"), deploy(host, AGENTS / "flow")


def _all(calls: list[Any]) -> list[Any]:
    """Every call's answer; a refusal fails the test with what every call said."""
    answers, refused = [], []
    for call in calls:
        try:
            answers.append(call.result())
        except grpc.RpcError as error:
            refused.append(f"{error.code().name}: {error.details()}")
    assert refused == [], refused
    return answers


def test_open_session_repeated_at_once_opens_one_session(
    host: HostProcess, agents: tuple[str, str]
) -> None:
    """Six OpenSession with one request_id at once answer with one session."""
    request = gateway_pb2.OpenSessionRequest(agent=agents[0], request_id=uuid.uuid4().hex)
    calls = [host.gateway.OpenSession.future(request, timeout=30) for _ in range(6)]
    assert len({answer.session.id for answer in _all(calls)}) == 1


def test_send_message_repeated_at_once_puts_one_message(
    host: HostProcess, agents: tuple[str, str]
) -> None:
    """Six SendMessage with one request_id at once put one message: each answers with its id,
    sequence and depth, and the next message sent is the very next of the mailbox."""
    kind = f"once_{uuid.uuid4().hex[:8]}"
    request = gateway_pb2.SendMessageRequest(agent=agents[0], type=kind, request_id=kind)
    calls = [host.gateway.SendMessage.future(request, timeout=30) for _ in range(6)]
    answers = {(a.message.id, a.message.sequence, a.mailbox_depth) for a in _all(calls)}
    assert len(answers) == 1, answers
    ((_, sequence, depth),) = answers
    after = host.gateway.SendMessage(
        gateway_pb2.SendMessageRequest(agent=agents[0], type=kind, request_id=kind + "_next"),
        timeout=30,
    )
    assert (after.message.sequence, after.mailbox_depth) == (sequence + 1, depth + 1)


def test_two_streams_sending_at_once_get_one_turn_each_in_order(
    host: HostProcess, agents: tuple[str, str]
) -> None:
    """Two Converse streams on one session each send three messages at once, one of them with
    a client_message_id both send: five turns, numbered 1-5 in the order accepted, answered in
    that order, the shared message once; both streams show every turn and end OK."""
    session = host.gateway.OpenSession(
        gateway_pb2.OpenSessionRequest(agent=agents[0]), timeout=30
    ).session
    left, right = Conversation(host, session.id, after=0), Conversation(host, session.id, after=0)
    for side, talk in (("left", left), ("right", right)):
        talk.say(f"{side} one")
        talk.say("shared", client_message_id="shared-1")
        talk.say(f"{side} two")
    # Each stream half-closes once both sent everything: a stream ends once the turns the
    # session accepted by its half-close are answered.
    for talk in (left, right):
        while kinds(talk.events).count("accepted") < 6:
            talk.next()
    for talk in (left, right):
        talk.done()
        talk.rest()
    seen = [left.events, right.events]
    for events in seen:
        completed = [e.turn for e in events if e.WhichOneof("event") == "turn_completed"]
        assert completed == [1, 2, 3, 4, 5], kinds(events)
        replies = {e.turn: e.reply.text for e in events if e.WhichOneof("event") == "reply"}
        heard = sorted(text.removeprefix("chatter heard: ") for text in replies.values())
        assert heard == ["left one", "left two", "right one", "right two", "shared"], replies
        accepted = [e for e in events if e.WhichOneof("event") == "accepted"]
        shared = {e.turn for e in accepted if e.accepted.client_message_id == "shared-1"}
        assert len(accepted) == 6 and len(shared) == 1, accepted
    assert seen[0] == seen[1]
    got = host.gateway.GetSession(gateway_pb2.GetSessionRequest(session_id=session.id), timeout=10)
    assert got.session.turns == 5


def test_close_while_a_turn_runs_and_two_wait_cancels_it_and_runs_neither(
    host: HostProcess, agents: tuple[str, str]
) -> None:
    """A session whose pipeline step holds until cancelled: turn 1 runs (the step holding),
    turns 2 and 3 wait behind it, and the session is closed. The step's task gets its cancel,
    the stream ends OK with `session_closed` last and no turn completed, and the session shows
    three turns accepted, closed."""
    tag = f"closing-{uuid.uuid4().hex[:8]}"
    pipeline = gateway_pb2.PipelineSpec(
        steps=[gateway_pb2.PipelineStep(name="wait", agent=agents[1], action="hold")]
    )
    pipeline.steps[0].params.update({"tag": tag})
    session = host.gateway.OpenSession(
        gateway_pb2.OpenSessionRequest(agent=agents[0], pipeline=pipeline), timeout=30
    ).session
    talk = Conversation(host, session.id)
    for text in ("first", "second", "third"):
        talk.say(text)
    logged(host, agents[1], "holding", {tag})
    talk.until(lambda e: e.WhichOneof("event") == "accepted" and e.turn == 3)
    closed = host.gateway.CloseSession(
        gateway_pb2.CloseSessionRequest(session_id=session.id, reason="overlap"), timeout=10
    ).session
    rest = talk.rest()  # ends OK: an error status would raise here
    logged(host, agents[1], "saw cancel", {tag})
    assert kinds(rest)[-1] == "session_closed" and rest[-1].session_closed.reason == "overlap"
    assert "turn_completed" not in kinds(talk.events), kinds(talk.events)
    assert (closed.state, closed.turns) == (gateway_pb2.SESSION_STATE_CLOSED, 3)
