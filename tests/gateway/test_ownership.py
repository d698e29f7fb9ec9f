"""With auth on: a session exists only for the identity that opened it; rights gate messaging
and the audit log; the sender of a message is the token's identity."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from ether.v1 import gateway_pb2, supervisor_pb2
from tests.support.agents import AGENTS, state_name
from tests.support.calls import struct
from tests.support.host import HostProcess

from ._support import Conversation, open_session, reply_text

ALICE = "alice-token-0c4b7d1e9f2a3b5c"
BOB = "bob-token-7e6d5c4b3a291807"
CAROL = "carol-token-a1b2c3d4e5f60718"


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    folder = tmp_path_factory.mktemp("gateway-auth")
    tokens = folder / "tokens"
    tokens.write_text(
        f"alice {ALICE}\nbob {BOB} gateway.message,gateway.session\ncarol {CAROL} agent.read\n"
    )
    tokens.chmod(0o600)
    config = folder / "ether.toml"
    config.write_text(f'[[agents]]\npath = "{AGENTS / "chatter"}"\n')
    host = HostProcess(folder / "state", "--auth-tokens-file", str(tokens), "--config", str(config))
    try:
        host.wait_serving()
        events = host.supervisor.WatchEvents(
            supervisor_pb2.WatchEventsRequest(agent="chatter", after_sequence=0),
            timeout=120,
            metadata=bearer(ALICE),
        )
        for event in events:
            if state_name(event.state) in ("RUNNING", "FATAL"):
                assert state_name(event.state) == "RUNNING", event.reason
                break
        events.cancel()
        yield host
    finally:
        host.stop()


def _not_found(call: object, request: object, token: str) -> None:
    with pytest.raises(grpc.RpcError) as error:
        result = call(request, timeout=10, metadata=bearer(token))  # type: ignore[operator]
        if hasattr(result, "__next__"):
            next(result)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_another_identity_gets_not_found(secured: HostProcess) -> None:
    session = open_session(
        secured, call_metadata=bearer(ALICE), agent="chatter", context={"secret": 42}
    )
    assert session.owner == "alice"
    gateway = secured.gateway
    for call, request in (
        (gateway.GetSession, gateway_pb2.GetSessionRequest(session_id=session.id)),
        (gateway.GetContext, gateway_pb2.GetContextRequest(session_id=session.id)),
        (
            gateway.UpdateContext,
            gateway_pb2.UpdateContextRequest(session_id=session.id, set=struct({"x": 1})),
        ),
        (gateway.CloseSession, gateway_pb2.CloseSessionRequest(session_id=session.id)),
        (gateway.WatchContext, gateway_pb2.WatchContextRequest(session_id=session.id)),
    ):
        _not_found(call, request, BOB)
    stolen = Conversation(secured, session.id, call_metadata=bearer(BOB))
    with pytest.raises(grpc.RpcError) as converse:
        stolen.next()
    assert converse.value.code() == grpc.StatusCode.NOT_FOUND
    mine = gateway.ListSessions(
        gateway_pb2.ListSessionsRequest(), timeout=10, metadata=bearer(BOB)
    ).sessions
    assert session.id not in [s.id for s in mine]
    # The owner still has everything, untouched.
    context = gateway.GetContext(
        gateway_pb2.GetContextRequest(session_id=session.id), timeout=10, metadata=bearer(ALICE)
    )
    assert (context.context["secret"], context.version) == (42, 1)
    talk = Conversation(secured, session.id, call_metadata=bearer(ALICE))
    assert reply_text(talk.turn("still mine")) == "chatter heard: still mine"
    talk.close()


def test_sender_is_the_tokens_identity(secured: HostProcess) -> None:
    request = gateway_pb2.SendMessageRequest(agent="chatter", type="note")
    request.data.struct_value.update({"sender": "alice"})
    sent = secured.gateway.SendMessage(request, timeout=10, metadata=bearer(BOB))
    assert sent.message.sender == "bob"


def test_a_message_may_only_concern_the_callers_sessions(secured: HostProcess) -> None:
    session = open_session(secured, call_metadata=bearer(ALICE), agent="chatter")
    request = gateway_pb2.SendMessageRequest(agent="chatter", type="note", session_id=session.id)
    with pytest.raises(grpc.RpcError) as error:
        secured.gateway.SendMessage(request, timeout=10, metadata=bearer(BOB))
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_rights_gate_messaging_mailboxes_and_the_audit_log(secured: HostProcess) -> None:
    gateway = secured.gateway
    for call, request, token in (
        (gateway.SendMessage, gateway_pb2.SendMessageRequest(agent="chatter", type="note"), CAROL),
        (gateway.Publish, gateway_pb2.PublishRequest(topic="news", type="note"), CAROL),
        (gateway.ListAudit, gateway_pb2.ListAuditRequest(), BOB),
    ):
        with pytest.raises(grpc.RpcError) as error:
            call(request, timeout=10, metadata=bearer(token))  # type: ignore[operator]
        assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
    for call, request in (
        (gateway.WatchAudit, gateway_pb2.WatchAuditRequest()),
        (gateway.Subscribe, gateway_pb2.SubscribeRequest(agent="chatter")),
    ):
        with pytest.raises(grpc.RpcError) as stream_error:
            next(call(request, timeout=10, metadata=bearer(BOB)))
        assert stream_error.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert (
        gateway.ListAudit(gateway_pb2.ListAuditRequest(), timeout=10, metadata=bearer(ALICE))
        is not None
    )


def test_token_is_required(secured: HostProcess) -> None:
    with pytest.raises(grpc.RpcError) as error:
        secured.gateway.ListSessions(gateway_pb2.ListSessionsRequest(), timeout=10)
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
