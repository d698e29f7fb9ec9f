"""Sessions: opening, conversing with typed and numbered events, resuming, closing, failover."""

from __future__ import annotations

import grpc
import pytest

from ether.v1 import agent_io_pb2, gateway_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import details
from tests.support.host import HostProcess

from ._support import Conversation, kinds, of, open_session, reply_text


@pytest.fixture(scope="module")
def chatter(host: HostProcess) -> str:
    return deploy(host, AGENTS / "chatter")


def test_open_by_name_and_converse(host: HostProcess, chatter: str) -> None:
    """A session opened by agent name answers each message; events are numbered 1, 2, 3... with no gap."""
    session = open_session(host, agent=chatter)
    assert session.id.startswith("ses-") and session.agent == chatter
    assert session.state == gateway_pb2.SESSION_STATE_OPEN and session.owner == "local"
    talk = Conversation(host, session.id)
    first = talk.turn("hello")
    second = talk.turn("how are you")
    talk.close()
    assert kinds(first) == ["accepted", "step_completed", "reply", "turn_completed"]
    assert reply_text(first) == "chatter heard: hello"
    assert reply_text(second) == "chatter heard: how are you"
    assert [e.sequence for e in first + second] == list(range(1, len(first + second) + 1))
    assert {e.turn for e in first} == {1} and {e.turn for e in second} == {2}
    step = of(first, "step_completed")[0]
    assert step.agent == chatter and step.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert step.latency.ToNanoseconds() > 0
    done = of(second, "turn_completed")[0]
    assert list(done.steps_run) == ["reply"]
    got = host.gateway.GetSession(
        gateway_pb2.GetSessionRequest(session_id=session.id), timeout=10
    ).session
    assert got.turns == 2 and got.last_sequence == second[-1].sequence


def test_open_by_capability_picks_a_gateway_agent(host: HostProcess, chatter: str) -> None:
    session = open_session(host, capability="chat")
    assert session.agent == chatter and session.capability == "chat"


def test_open_refuses_what_cannot_serve(host: HostProcess, chatter: str) -> None:
    """Unknown agent or capability: NOT_FOUND; a general agent: INVALID_ARGUMENT."""
    deploy(host, AGENTS / "stepper")
    with pytest.raises(grpc.RpcError) as missing:
        open_session(host, agent="nobody")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as no_capability:
        open_session(host, capability="telepathy")
    assert no_capability.value.code() == grpc.StatusCode.NOT_FOUND
    assert details(no_capability.value)["ErrorInfo"].reason == "NO_GATEWAY_AGENT"
    with pytest.raises(grpc.RpcError) as general:
        open_session(host, agent="stepper")
    assert general.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(general.value)["ErrorInfo"].reason == "NOT_A_GATEWAY_AGENT"


def test_unknown_session_is_not_found(host: HostProcess, chatter: str) -> None:
    for call, request in (
        (host.gateway.GetSession, gateway_pb2.GetSessionRequest(session_id="ses-0000000000000000")),
        (host.gateway.GetContext, gateway_pb2.GetContextRequest(session_id="ses-\x00/../x" * 20)),
        (host.gateway.CloseSession, gateway_pb2.CloseSessionRequest(session_id="nope")),
    ):
        with pytest.raises(grpc.RpcError) as error:
            call(request, timeout=10)
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
    talk = Conversation(host, "ses-0000000000000000")
    with pytest.raises(grpc.RpcError) as converse:
        talk.next()
    assert converse.value.code() == grpc.StatusCode.NOT_FOUND


def test_custom_events_progress_and_reply_chunks(host: HostProcess, chatter: str) -> None:
    """What an agent emits reaches the client as typed events of the turn."""
    talk = Conversation(host, open_session(host, agent=chatter).id)
    emitted = talk.turn("emit scam_warning")
    progressed = talk.turn("progress")
    chunked = talk.turn("chunks 3")
    talk.close()
    custom = of(emitted, "custom")
    assert [(c.type, c.agent) for c in custom] == [("scam_warning", chatter)]
    assert custom[0].data.struct_value["turn"] == 1
    assert [(p.progress, p.total, p.message) for p in of(progressed, "progress")] == [
        (1, 2, "thinking"),
        (2, 2, "writing"),
    ]
    replies = of(chunked, "reply")
    assert [(r.text, r.partial) for r in replies] == [
        ("c0 ", True),
        ("c1 ", True),
        ("c2 ", True),
        ("done", False),
    ]


def test_reconnect_resumes_after_the_last_sequence(host: HostProcess, chatter: str) -> None:
    """A client that comes back with after_sequence gets exactly the events it missed."""
    session = open_session(host, agent=chatter)
    first = Conversation(host, session.id)
    events = first.turn("one") + first.turn("two")
    first.close()
    seen = events[3].sequence
    again = Conversation(host, session.id, after=seen)
    replay = again.until(lambda e: e.sequence == events[-1].sequence)
    more = again.turn("three")
    again.close()
    assert [e.sequence for e in replay] == [e.sequence for e in events[4:]]
    assert [e.SerializeToString() for e in replay] == [e.SerializeToString() for e in events[4:]]
    assert more[0].sequence == events[-1].sequence + 1


def test_several_streams_see_every_event(host: HostProcess, chatter: str) -> None:
    session = open_session(host, agent=chatter)
    speaker = Conversation(host, session.id)
    listener = Conversation(host, session.id, after=0)
    spoken = speaker.turn("shared")
    heard = listener.until(lambda e: e.WhichOneof("event") == "turn_completed")
    speaker.close()
    listener.close()
    assert [e.SerializeToString() for e in heard] == [e.SerializeToString() for e in spoken]


def test_half_close_ends_after_the_running_turn(host: HostProcess, chatter: str) -> None:
    """A client that sends its messages and closes its side still gets every reply, then OK."""
    talk = Conversation(host, open_session(host, agent=chatter).id)
    talk.say("a")
    talk.say("b")
    talk.done()
    events = talk.rest()
    assert [r.text for r in of(events, "reply")] == ["chatter heard: a", "chatter heard: b"]
    assert kinds(events)[-1] == "turn_completed"


def test_resent_client_message_id_is_not_run_twice(host: HostProcess, chatter: str) -> None:
    talk = Conversation(host, open_session(host, agent=chatter).id)
    first = talk.turn("remember once 1", client_message_id="m-1")
    talk.say("remember once 2", client_message_id="m-1")
    again = talk.until(lambda e: e.WhichOneof("event") == "accepted")
    talk.close()
    assert reply_text(first) == "remembered once at version 2"
    assert again[-1].turn == 1 and again[-1].accepted.client_message_id == "m-1"


def test_bad_messages_end_the_stream_and_spare_the_session(host: HostProcess, chatter: str) -> None:
    """Empty, oversized and out-of-order messages are refused with the right status; the session
    and its context are unharmed."""
    session = open_session(host, agent=chatter, context={"kept": True})
    cases = [
        (
            gateway_pb2.ConverseRequest(message=gateway_pb2.UserMessage()),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            gateway_pb2.ConverseRequest(message=gateway_pb2.UserMessage(text="x" * (300 * 1024))),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        ),
        (
            gateway_pb2.ConverseRequest(start=gateway_pb2.ConverseStart(session_id=session.id)),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
    ]
    for request, status in cases:
        talk = Conversation(host, session.id)
        talk.send_raw(request)
        with pytest.raises(grpc.RpcError) as error:
            talk.rest()
        assert error.value.code() == status
    too_large = Conversation(host, session.id)
    too_large.say("x" * (300 * 1024))
    with pytest.raises(grpc.RpcError) as big:
        too_large.rest()
    assert details(big.value)["ErrorInfo"].reason == "MESSAGE_TOO_LARGE"
    talk = Conversation(host, session.id)
    assert reply_text(talk.turn("still here")) == "chatter heard: still here"
    talk.close()
    context = host.gateway.GetContext(
        gateway_pb2.GetContextRequest(session_id=session.id), timeout=10
    )
    assert context.context["kept"] is True and context.version == 1


def test_first_message_must_be_start(host: HostProcess, chatter: str) -> None:
    call = host.gateway.Converse(
        iter([gateway_pb2.ConverseRequest(message=gateway_pb2.UserMessage(text="hi"))]), timeout=10
    )
    with pytest.raises(grpc.RpcError) as error:
        list(call)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_close_ends_streams_and_keeps_the_session_readable(host: HostProcess, chatter: str) -> None:
    session = open_session(host, agent=chatter, context={"topic": "tea"})
    talk = Conversation(host, session.id)
    talk.say("hang")
    talk.until(lambda e: e.WhichOneof("event") == "accepted")
    closed = host.gateway.CloseSession(
        gateway_pb2.CloseSessionRequest(session_id=session.id, reason="user left"), timeout=10
    ).session
    rest = talk.rest()
    assert closed.state == gateway_pb2.SESSION_STATE_CLOSED and closed.HasField("closed_at")
    assert kinds(rest)[-1] == "session_closed" and rest[-1].session_closed.reason == "user left"
    assert "reply" not in kinds(rest)  # the hanging turn was cancelled, not answered
    again = host.gateway.CloseSession(
        gateway_pb2.CloseSessionRequest(session_id=session.id), timeout=10
    )
    assert again.session.closed_at == closed.closed_at  # a no-op
    context = host.gateway.GetContext(
        gateway_pb2.GetContextRequest(session_id=session.id), timeout=10
    )
    assert context.context["topic"] == "tea"
    with pytest.raises(grpc.RpcError) as refused:
        Conversation(host, session.id).next()
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    listed = host.gateway.ListSessions(
        gateway_pb2.ListSessionsRequest(state=gateway_pb2.SESSION_STATE_CLOSED), timeout=10
    ).sessions
    assert session.id in [s.id for s in listed]


def test_repeated_request_id_returns_the_same_session(host: HostProcess, chatter: str) -> None:
    first = open_session(host, agent=chatter, request_id="6f0c4a9e-0000-4000-8000-000000000001")
    second = open_session(host, agent=chatter, request_id="6f0c4a9e-0000-4000-8000-000000000001")
    assert first.id == second.id


def test_failover_when_the_serving_agent_dies(host: HostProcess) -> None:
    """The agent dies during a turn: that turn reports the crash and the failover, the next turn
    is answered by the other agent offering the capability."""
    never = supervisor_pb2.RESTART_POLICY_NEVER
    a = deploy(host, AGENTS / "chatter", name="relay-a", capabilities=["relay"], restart=never)
    b = deploy(host, AGENTS / "chatter", name="relay-b", capabilities=["relay"], restart=never)
    session = open_session(host, capability="relay")
    serving, other = (a, b) if session.agent == a else (b, a)
    talk = Conversation(host, session.id)
    crashed = talk.turn("crash")
    answered = talk.turn("are you there")
    talk.close()
    errors = of(crashed, "error")
    assert [(e.step, e.error.code) for e in errors] == [("reply", "agent_crashed")]
    failover = of(crashed, "agent_failover")
    assert [(f.from_agent, f.to_agent, f.reason) for f in failover] == [
        (serving, other, "agent_died")
    ]
    assert reply_text(answered) == f"{other} heard: are you there"
    got = host.gateway.GetSession(
        gateway_pb2.GetSessionRequest(session_id=session.id), timeout=10
    ).session
    assert got.agent == other


def test_failover_when_the_serving_agent_was_stopped(host: HostProcess) -> None:
    """An agent stopped between turns is replaced at the start of the next turn."""
    a = deploy(host, AGENTS / "chatter", name="desk-a", capabilities=["desk"])
    b = deploy(host, AGENTS / "chatter", name="desk-b", capabilities=["desk"])
    session = open_session(host, capability="desk")
    serving, other = (a, b) if session.agent == a else (b, a)
    talk = Conversation(host, session.id)
    assert reply_text(talk.turn("first")) == f"{serving} heard: first"
    host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name=serving), timeout=30)
    events = talk.turn("second")
    talk.close()
    failover = of(events, "agent_failover")
    assert [(f.from_agent, f.to_agent, f.reason) for f in failover] == [
        (serving, other, "agent_stopped")
    ]
    assert kinds(events).index("agent_failover") < kinds(events).index("reply")
    assert reply_text(events) == f"{other} heard: second"


def test_a_lone_agent_that_restarts_serves_the_next_turn(host: HostProcess) -> None:
    """With no other agent to fail over to, the next turn waits for the restarted one."""
    solo = deploy(host, AGENTS / "chatter", name="solo", capabilities=["solo"])
    talk = Conversation(host, open_session(host, capability="solo").id)
    crashed = talk.turn("crash")
    watch_until(host, solo, {"BACKOFF"})
    answered = talk.turn("back again")
    talk.close()
    assert [e.error.code for e in of(crashed, "error")] == ["agent_crashed"]
    assert not of(crashed + answered, "agent_failover")
    assert reply_text(answered) == "solo heard: back again"
