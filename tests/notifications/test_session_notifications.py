"""Completion notifications of gateway sessions (docs/notifications.md, "Sessions"): a session
opened with a notify has each turn's final answer delivered (kind "turn": the turn's number and
the gateway agent's reply) and, when it closes, one "session_closed" delivery -- to a signed
webhook on a real loopback HTTP server, or on a reply topic where a subscribed agent finds it.
A bad notify opens no session; the notify is kept with the session across a host restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import common_pb2, gateway_pb2
from tests.cluster.support import cluster_host, published
from tests.gateway._support import Conversation, open_session, reply_text
from tests.notifications.support import (
    BUDGET,
    SECRET,
    Receiver,
    deliveries,
    notify_config,
    notifying_host,
)
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import data, execute
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the Redis fixture of the cluster test


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    with notifying_host(tmp_path_factory.mktemp("session-notify")) as process:
        deploy(process, AGENTS / "chatter")
        deploy(process, AGENTS / "toolbox", name="listener")
        yield process


def _body(hit: Any) -> dict[str, Any]:
    expected = hmac.new(SECRET.encode(), hit.body, hashlib.sha256).hexdigest()
    assert hit.headers["x-ether-signature"] == f"sha256={expected}"
    return json.loads(hit.body)  # type: ignore[no-any-return]


def _close(host: HostProcess, session_id: str, reason: str = "") -> None:
    request = gateway_pb2.CloseSessionRequest(session_id=session_id, reason=reason)
    host.gateway.CloseSession(request, timeout=30)


def test_each_turn_and_the_closing_reach_the_webhook_signed(
    host: HostProcess, receiver: Receiver
) -> None:
    url = receiver.url("/session")
    session = open_session(host, agent="chatter", notify=common_pb2.Notify(webhook_url=url))
    got = host.gateway.GetSession(
        gateway_pb2.GetSessionRequest(session_id=session.id), timeout=10
    ).session
    assert got.notify.webhook_url == url and not got.notify.reply_topic

    talk = Conversation(host, session.id)
    assert reply_text(talk.turn("hello", client_message_id="m-1")) == "chatter heard: hello"
    assert reply_text(talk.turn("again")) == "chatter heard: again"
    talk.close()
    # Two deliveries on their way at once may arrive in either order.
    first, second = sorted(
        (_body(hit) for hit in receiver.wait("/session", 2)), key=lambda b: b["turn"]["number"]
    )
    assert (first["kind"], first["id"]) == ("turn", session.id)
    assert first["turn"]["number"] == 1 and first["turn"]["id"] == f"{session.id}.1"
    assert first["turn"]["client_message_id"] == "m-1"
    assert first["turn"]["reply"]["text"] == "chatter heard: hello"
    assert first["turn"]["errors"] == []
    assert second["turn"]["number"] == 2
    assert second["turn"]["reply"]["text"] == "chatter heard: again"

    _close(host, session.id, "done talking")
    (closed,) = [b for b in map(_body, receiver.wait("/session", 3)) if "session" in b]
    assert (closed["kind"], closed["id"]) == ("session_closed", session.id)
    assert closed["session"]["reason"] == "done talking" and closed["session"]["turns"] == 2
    kinds = sorted(d["kind"] for d in deliveries(host, session.id))
    assert kinds == ["session_closed", "turn", "turn"]


def test_an_idle_session_delivers_its_closing(host: HostProcess, receiver: Receiver) -> None:
    session = open_session(
        host,
        agent="chatter",
        idle_timeout=duration_pb2.Duration(seconds=1),
        notify=common_pb2.Notify(webhook_url=receiver.url("/idle")),
    )
    (hit,) = receiver.wait("/idle", 1)
    body = _body(hit)
    assert (body["kind"], body["id"]) == ("session_closed", session.id)
    assert (body["session"]["reason"], body["session"]["turns"]) == ("idle_timeout", 0)
    assert body["session"]["closed_at"] >= session.created_at.seconds


def test_a_reply_topic_receives_the_turn(host: HostProcess) -> None:
    assert data(execute(host, "listener", "subscribe", {"topic": "session.turns"})) == [
        "session.turns"
    ]
    session = open_session(
        host, agent="chatter", notify=common_pb2.Notify(reply_topic="session.turns")
    )
    talk = Conversation(host, session.id)
    assert reply_text(talk.turn("over the topic")) == "chatter heard: over the topic"
    talk.close()
    budget = time.monotonic() + BUDGET
    while True:  # each receive waits up to 5 s for a message in the mailbox
        got = data(execute(host, "listener", "receive", {"wait_ms": 5000}))
        if got or time.monotonic() > budget:
            break
    (message,) = got
    assert (message["type"], message["sender"]) == ("turn_completed", "@notify")
    assert message["data"]["id"] == session.id
    assert message["data"]["turn"]["reply"]["text"] == "chatter heard: over the topic"


@pytest.mark.parametrize(
    ("notify", "names"),
    [
        ({"webhook_url": "ftp://127.0.0.1/x"}, "notify.webhook_url"),
        ({"webhook_url": "not a url"}, "notify.webhook_url"),
        ({"reply_topic": "Not A Topic"}, "topic"),
    ],
)
def test_a_bad_notify_opens_no_session(
    host: HostProcess, notify: dict[str, str], names: str
) -> None:
    before = host.gateway.ListSessions(gateway_pb2.ListSessionsRequest(), timeout=10).sessions
    with pytest.raises(grpc.RpcError) as caught:
        open_session(host, agent="chatter", notify=common_pb2.Notify(**notify))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert names in caught.value.details()
    after = host.gateway.ListSessions(gateway_pb2.ListSessionsRequest(), timeout=10).sessions
    assert len(after) == len(before)


def test_a_webhook_needs_a_secret_on_the_host(tmp_path: Path, receiver: Receiver) -> None:
    process = HostProcess(
        tmp_path / "state", env={"ETHER_CONFIG": str(notify_config(tmp_path, secret=""))}
    )
    try:
        process.wait_serving()
        deploy(process, AGENTS / "chatter")
        with pytest.raises(grpc.RpcError) as caught:
            open_session(
                process,
                agent="chatter",
                notify=common_pb2.Notify(webhook_url=receiver.url("/unsigned")),
            )
    finally:
        process.stop()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "secret" in caught.value.details()


def test_the_notify_is_kept_across_a_host_restart(tmp_path: Path, receiver: Receiver) -> None:
    """Opened on one host, turned on the next host on the same state directory: the turn after
    the restart is delivered to the webhook the session was opened with."""
    config = {"ETHER_CONFIG": str(notify_config(tmp_path, SECRET))}
    first = HostProcess(tmp_path / "state", env=config)
    try:
        first.wait_serving()
        deploy(first, AGENTS / "chatter")
        url = receiver.url("/restarted")
        session = open_session(first, agent="chatter", notify=common_pb2.Notify(webhook_url=url))
    finally:
        assert first.stop() == 0
    second = HostProcess(tmp_path / "state", env=config)
    try:
        second.wait_serving()
        watch_until(second, "chatter", {"RUNNING"})  # deployed before the restart
        got = second.gateway.GetSession(
            gateway_pb2.GetSessionRequest(session_id=session.id), timeout=10
        ).session
        assert got.notify.webhook_url == url
        talk = Conversation(second, session.id)
        assert reply_text(talk.turn("after")) == "chatter heard: after"
        talk.close()
        (hit,) = receiver.wait("/restarted", 1)
    finally:
        second.stop()
    body = _body(hit)
    assert (body["kind"], body["id"]) == ("turn", session.id)
    assert body["turn"]["reply"]["text"] == "chatter heard: after"


def test_a_session_moved_to_another_host_keeps_its_notify(
    tmp_path: Path, receiver: Receiver, redis_server: RedisServer
) -> None:
    """Two hosts on one real redis-server: a session opened on a (which runs the gateway
    agent) and continued on b has its turn on b delivered by b, and its closing there too."""
    config = {"ETHER_CONFIG": str(notify_config(tmp_path, SECRET))}
    started: list[HostProcess] = []
    try:
        started.append(cluster_host(tmp_path, redis_server.url, "a", env=config))
        host_a = started[0]
        deploy(host_a, AGENTS / "chatter")
        published(host_a, "chatter")
        started.append(cluster_host(tmp_path, redis_server.url, "b", env=config))
        host_b = started[1]
        url = receiver.url("/moved")
        session = open_session(host_a, agent="chatter", notify=common_pb2.Notify(webhook_url=url))
        on_b = Conversation(host_b, session.id)
        assert reply_text(on_b.turn("hello from b")) == "chatter heard: hello from b"
        on_b.close()
        _close(host_b, session.id, "bye from b")
        bodies = [_body(hit) for hit in receiver.wait("/moved", 2)]
        on_b_records = sorted(d["kind"] for d in deliveries(host_b, session.id))
        on_a_records = deliveries(host_a, session.id)
    finally:
        for host in started:
            host.stop()
    (turn,) = [b for b in bodies if b["kind"] == "turn"]
    assert turn["turn"]["reply"]["text"] == "chatter heard: hello from b"
    (closed,) = [b for b in bodies if b["kind"] == "session_closed"]
    assert closed["session"]["reason"] == "bye from b"
    assert on_b_records == ["session_closed", "turn"] and not on_a_records
