"""The gateway across hosts (docs/cluster.md, "The gateway across hosts"): messages by agent
name and topics reach agents on another host, over a real redis-server between real hosts.

Host a runs the toolbox agent "inbox-a" (no on_message handler: messages wait for
msg.receive); host b runs the toolbox agents "sender-b" and "listener-b"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.cluster.support import cluster_host, published
from tests.gateway._support import send, subscribe
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, execute
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture

TOOLBOX = AGENTS / "toolbox"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway")


@pytest.fixture(scope="module")
def host_a(folder: Path, redis_server: RedisServer) -> Iterator[HostProcess]:
    host = cluster_host(folder, redis_server.url, "a")
    try:
        deploy(host, TOOLBOX, name="inbox-a")
        published(host, "inbox-a")
        yield host
    finally:
        host.stop()


@pytest.fixture(scope="module")
def host_b(folder: Path, redis_server: RedisServer, host_a: HostProcess) -> Iterator[HostProcess]:
    host = cluster_host(folder, redis_server.url, "b")
    try:
        deploy(host, TOOLBOX, name="sender-b")
        deploy(host, TOOLBOX, name="listener-b")
        published(host, "listener-b")
        yield host
    finally:
        host.stop()


def ok(host: HostProcess, agent: str, action: str, params: dict[str, Any], wait: float = 30) -> Any:
    """The data of a task that must succeed (its error in the assertion when it does not)."""
    output = execute(host, agent, action, params, timeout=wait)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    return data(output)


def received(host: HostProcess, agent: str, wait_ms: int = 0) -> Any:
    """What ``agent`` takes from its mailbox with msg.receive (waiting up to ``wait_ms`` for the
    first message)."""
    return ok(host, agent, "receive", {"wait_ms": wait_ms}, wait=wait_ms / 1000 + 30)


def test_an_agent_on_b_messages_an_agent_on_a_by_name(
    host_a: HostProcess, host_b: HostProcess
) -> None:
    """msg.send from an agent on b lands in the mailbox of the agent on a, with the sender the
    host stamps; a client's SendMessage on b does too, and its answer is a's (id, depth)."""
    sent = ok(host_b, "sender-b", "send", {"to": "inbox-a", "type": "hello", "data": 1})
    assert sent["sender"] == "agent:sender-b" and sent["id"].startswith("msg-")
    by_client = send(host_b, "inbox-a", "report", {"pages": 3}, request_id="r-1")
    assert by_client.message.agent == "inbox-a" and by_client.message.sender == "local"
    assert by_client.mailbox_depth == 2  # the first message waits there too
    # A retry of the same request on b puts nothing new (a remembers the request id).
    again = send(host_b, "inbox-a", "report", {"pages": 3}, request_id="r-1")
    assert again.message.id == by_client.message.id
    got = received(host_a, "inbox-a")
    assert [(m["id"], m["sender"], m["type"], m["data"]) for m in got] == [
        (sent["id"], "agent:sender-b", "hello", 1),
        (by_client.message.id, "local", "report", {"pages": 3}),
    ]


def test_a_message_for_an_agent_no_host_runs_is_not_found(host_b: HostProcess) -> None:
    with pytest.raises(grpc.RpcError) as missing:
        send(host_b, "nobody-anywhere", "hello")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert "any host of the cluster" in (missing.value.details() or "")


def test_a_topic_published_on_a_reaches_subscribers_on_b(
    host_a: HostProcess, host_b: HostProcess
) -> None:
    """An agent on b that subscribed gets a copy in its mailbox; a Subscribe stream on b sees
    the message in b's copy of the topic; both with the publisher's id, sender and data."""
    assert ok(host_b, "listener-b", "subscribe", {"topic": "news.cluster"}) == ["news.cluster"]
    stream = subscribe(host_b, topic="news.cluster", after=0)
    request = gateway_pb2.PublishRequest(topic="news.cluster", type="headline")
    json_format.ParseDict({"title": "hosts agree"}, request.data)
    published_message = host_a.gateway.Publish(request, timeout=30).message
    seen = next(stream).message
    stream.cancel()
    assert (seen.id, seen.sender, seen.topic) == (published_message.id, "local", "news.cluster")
    assert json_format.MessageToDict(seen.data) == {"title": "hosts agree"}
    got = received(host_b, "listener-b", wait_ms=30_000)
    assert [(m["sender"], m["type"], m["data"]) for m in got] == [
        ("local", "headline", {"title": "hosts agree"})
    ]
    # msg.publish from an agent on a reaches b's subscriber the same way.
    ok(host_a, "inbox-a", "publish", {"topic": "news.cluster", "type": "update", "data": 2})
    got = received(host_b, "listener-b", wait_ms=30_000)
    assert [(m["sender"], m["type"], m["data"]) for m in got] == [("agent:inbox-a", "update", 2)]
