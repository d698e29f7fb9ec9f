"""Messaging: mailboxes by agent name (bounded), topics, and the sender the transport says."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, details, execute, struct
from tests.support.host import HostProcess

from ._support import send, subscribe

TOOLBOX = AGENTS / "toolbox"


@pytest.fixture(scope="module")
def postbox(host: HostProcess) -> str:
    """A toolbox agent with an on_message handler that republishes on '<name>.received'."""
    return deploy(host, TOOLBOX, name="postbox", env={"TOOLBOX_ON_MESSAGE": "1"})


@pytest.fixture(scope="module")
def inbox(host: HostProcess) -> str:
    """A toolbox agent without a handler, mailbox of 3: messages wait for msg.receive."""
    return deploy(host, TOOLBOX, name="inbox", config=struct({"mailbox_size": 3}))


def test_message_reaches_the_agents_handler_with_the_transport_sender(
    host: HostProcess, postbox: str
) -> None:
    """The handler sees sender "local" (the caller's identity), not what the payload claims."""
    received = subscribe(host, topic=f"{postbox}.received", after=0)  # a new topic: nothing missed
    sent = send(host, postbox, "review_request", {"sender": "mallory", "doc": 7})
    got = next(received).message
    received.cancel()
    assert sent.message.sender == "local" and sent.message.id.startswith("msg-")
    handled = json_format.MessageToDict(got.data)
    assert handled == {
        "id": sent.message.id,
        "sender": "local",
        "type": "review_request",
        "data": {"sender": "mallory", "doc": 7},
    }
    assert got.sender == f"agent:{postbox}"  # the handler's own publish, stamped by the host


def test_message_to_a_missing_agent_is_not_found(host: HostProcess) -> None:
    with pytest.raises(grpc.RpcError) as error:
        send(host, "nobody-home", "hello")
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_bad_messages_are_refused(host: HostProcess, inbox: str) -> None:
    """Each bad message is refused with its status; what was already in the mailbox stays."""
    kept = send(host, inbox, "kept", {"n": 1}).message.id
    with pytest.raises(grpc.RpcError) as big:
        send(host, inbox, "huge", {"blob": "x" * (256 * 1024)})
    assert big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert details(big.value)["ErrorInfo"].reason == "MESSAGE_TOO_LARGE"
    with pytest.raises(grpc.RpcError) as bad_type:
        send(host, inbox, "Not Snake")
    assert bad_type.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as other_session:
        send(host, inbox, "about", session_id="ses-ffffffffffffffff")
    assert other_session.value.code() == grpc.StatusCode.NOT_FOUND
    assert [m["id"] for m in data(execute(host, inbox, "receive"))] == [kept]


def test_full_mailbox_refuses_and_loses_nothing(host: HostProcess, inbox: str) -> None:
    """Mailbox of 3: the fourth send is RESOURCE_EXHAUSTED with RetryInfo; the three are all
    received, in order; then there is room again."""
    ids = [send(host, inbox, "job", {"n": n}).message.id for n in range(3)]
    with pytest.raises(grpc.RpcError) as full:
        send(host, inbox, "job", {"n": 3})
    assert full.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    found = details(full.value)
    assert found["ErrorInfo"].reason == "MAILBOX_FULL" and "RetryInfo" in found
    assert found["ErrorInfo"].metadata["limit"] == "3"
    assert found["QuotaFailure"].violations[0].subject == f"agent:{inbox}"
    output = execute(host, inbox, "receive")
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    received = data(output)
    assert [m["id"] for m in received] == ids and [m["data"]["n"] for m in received] == [0, 1, 2]
    assert {m["sender"] for m in received} == {"local"}
    assert send(host, inbox, "job", {"n": 4}).mailbox_depth == 1
    execute(host, inbox, "receive")


def test_repeated_request_id_is_delivered_once(host: HostProcess, inbox: str) -> None:
    first = send(host, inbox, "once", request_id="1b4e28ba-2fa1-41d2-883f-0016d3cca427")
    again = send(host, inbox, "once", request_id="1b4e28ba-2fa1-41d2-883f-0016d3cca427")
    assert first.message.id == again.message.id
    assert [m["type"] for m in data(execute(host, inbox, "receive"))] == ["once"]


def test_agent_to_agent_message_carries_the_calling_agent(
    host: HostProcess, postbox: str, inbox: str
) -> None:
    """An agent's msg.send is stamped agent:<caller>, whatever its data says."""
    output = execute(
        host, inbox, "send", {"to": postbox, "type": "ping", "data": {"sender": "local"}}
    )
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    assert data(output)["sender"] == f"agent:{inbox}"
    observed = send(host, inbox, "observed").message
    watch = subscribe(host, agent=inbox, after=observed.sequence - 1)
    copy = next(watch).message
    watch.cancel()
    assert (copy.agent, copy.type, copy.sender) == (inbox, "observed", "local")
    execute(host, inbox, "receive")


def test_topics_publish_subscribe_and_resume(host: HostProcess, inbox: str) -> None:
    topic = "session.milestones"
    live = subscribe(host, topic=topic, after=0)  # a new topic: replay all, then follow
    request = gateway_pb2.PublishRequest(topic=topic, type="milestone_report")
    published = [host.gateway.Publish(request, timeout=10) for _ in range(3)]
    got = [next(live).message for _ in range(3)]
    published.append(host.gateway.Publish(request, timeout=10))  # the stream is surely open now
    got.append(next(live).message)
    live.cancel()
    assert published[-1].subscribers == 1
    assert [m.sequence for m in got] == [1, 2, 3, 4] == [p.message.sequence for p in published]
    resumed = subscribe(host, topic=topic, after=published[0].message.sequence)
    again = [next(resumed).message.id for _ in range(3)]
    resumed.cancel()
    assert again == [p.message.id for p in published[1:]]


def test_agents_publish_and_subscribe_through_host_calls(host: HostProcess, inbox: str) -> None:
    """An agent subscribed with msg.subscribe finds topic messages in its mailbox; an agent's
    publish reaches client subscribers stamped agent:<name>."""
    assert data(execute(host, inbox, "subscribe", {"topic": "news.daily"})) == ["news.daily"]
    watch = subscribe(host, topic="news.daily", after=0)
    output = execute(
        host, inbox, "publish", {"topic": "news.daily", "type": "headline", "data": "hi"}
    )
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    seen = next(watch).message
    watch.cancel()
    assert (seen.sender, seen.type, seen.data.string_value) == (f"agent:{inbox}", "headline", "hi")
    mailbox = data(execute(host, inbox, "receive"))
    assert [(m["topic"], m["type"], m["sender"]) for m in mailbox] == [
        ("", "headline", f"agent:{inbox}")
    ]


def test_bad_subscriptions_are_refused(host: HostProcess, inbox: str) -> None:
    for request, status in (
        (gateway_pb2.SubscribeRequest(), grpc.StatusCode.INVALID_ARGUMENT),
        (gateway_pb2.SubscribeRequest(topic="Bad Topic!"), grpc.StatusCode.INVALID_ARGUMENT),
        (gateway_pb2.SubscribeRequest(agent="nobody"), grpc.StatusCode.NOT_FOUND),
    ):
        with pytest.raises(grpc.RpcError) as error:
            next(host.gateway.Subscribe(request, timeout=10))
        assert error.value.code() == status
    with pytest.raises(grpc.RpcError) as publish:
        host.gateway.Publish(gateway_pb2.PublishRequest(topic="../etc", type="x"), timeout=10)
    assert publish.value.code() == grpc.StatusCode.INVALID_ARGUMENT
