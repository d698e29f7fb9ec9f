"""The gateway across hosts (docs/cluster.md, "The gateway across hosts"): messages by agent
name and topics reach agents on another host, and sessions are read, written and continued on
any host, over a real redis-server between real hosts.

Host a runs the toolbox agent "inbox-a" (no on_message handler: messages wait for
msg.receive) and the gateway agent "chatter"; host b runs the toolbox agents "sender-b" and
"listener-b" and no gateway agent. The failover test starts hosts of its own."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.cluster.support import cluster_host, published
from tests.gateway._support import (
    Conversation,
    kinds,
    of,
    open_session,
    reply_text,
    send,
    subscribe,
)
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, details, execute, struct
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture

TOOLBOX = AGENTS / "toolbox"
CHATTER = AGENTS / "chatter"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway")


@pytest.fixture(scope="module")
def host_a(folder: Path, redis_server: RedisServer) -> Iterator[HostProcess]:
    host = cluster_host(folder, redis_server.url, "a")
    try:
        deploy(host, TOOLBOX, name="inbox-a")
        deploy(host, CHATTER)
        published(host, "chatter")
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


def context_of(host: HostProcess, session_id: str) -> tuple[dict[str, Any], int]:
    request = gateway_pb2.GetContextRequest(session_id=session_id)
    got = host.gateway.GetContext(request, timeout=30)
    return json_format.MessageToDict(got.context), got.version


def test_a_session_opened_on_a_is_read_on_b_and_continued_there(
    host_a: HostProcess, host_b: HostProcess
) -> None:
    """Opened on a, its context written there by a client and by the agent; read on b as it
    is; continued on b, whose turns run on the agent on a, which writes the context b now holds;
    a's stream of the session ends UNAVAILABLE, saying where it went."""
    session = open_session(host_a, agent="chatter", context={"user": "ada"})
    on_a = Conversation(host_a, session.id)
    first = on_a.turn("remember color blue")
    assert reply_text(first) == "remembered color at version 2"
    update = gateway_pb2.UpdateContextRequest(session_id=session.id, set=struct({"mood": "calm"}))
    assert host_a.gateway.UpdateContext(update, timeout=30).change.version == 3
    # Read on b: the context, the session and the owner's list, as a left them.
    assert context_of(host_b, session.id) == ({"user": "ada", "color": "blue", "mood": "calm"}, 3)
    got = host_b.gateway.GetSession(
        gateway_pb2.GetSessionRequest(session_id=session.id), timeout=30
    ).session
    assert (got.agent, got.turns, got.state) == ("chatter", 1, gateway_pb2.SESSION_STATE_OPEN)
    listed = host_b.gateway.ListSessions(gateway_pb2.ListSessionsRequest(), timeout=30)
    assert session.id in [s.id for s in listed.sessions]
    # Continued on b, after the last event a showed: numbering goes on.
    last = on_a.events[-1].sequence
    on_b = Conversation(host_b, session.id, after=last)
    second = on_b.turn("hello from b")
    assert reply_text(second) == "chatter heard: hello from b"
    # First the context change a made after that, then the turn: no gap, no repeat.
    assert [e.sequence for e in second] == list(range(last + 1, last + 1 + len(second)))
    assert second[0].context_changed.version == 3
    assert of(second, "step_completed")[0].agent == "chatter"
    third = on_b.turn("remember size large")  # ctx.put by the agent on a, on the session b holds
    assert reply_text(third) == "remembered size at version 4", kinds(third)
    assert [e.turn for e in second + third if e.WhichOneof("event") == "accepted"] == [2, 3]
    on_b.close()
    # a's stream of the session ended when b took it over.
    with pytest.raises(grpc.RpcError) as moved:
        on_a.rest()
    assert moved.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "moved to host b" in (moved.value.details() or "")
    # And a reads what b wrote.
    assert context_of(host_a, session.id) == (
        {"user": "ada", "color": "blue", "mood": "calm", "size": "large"},
        4,
    )
    # b runs no gateway agent: a session opened there by capability is served by a's.
    assert open_session(host_b, capability="chat").agent == "chatter"


def taken_by(host: HostProcess, turn_step: str) -> None:
    """Wait until ``host`` has taken a task another host sent it: a turn's step, its task id
    ``<session>.<turn>.<step>.<random>``."""
    host.wait_for_log(
        lambda r: (
            r.get("event") == "cluster task taken"
            and str(r.get("task_id")).startswith(f"{turn_step}.")
        ),
        60,
    )


def test_a_sessions_gateway_agent_fails_over_to_other_hosts(
    folder: Path, redis_server: RedisServer, host_a: HostProcess, host_b: HostProcess
) -> None:
    """A session on b served by "helper", which only c runs. Once c has stopped and d runs
    "helper", the next turn is answered by "helper" on d, with no failover: the same agent.
    Once d has stopped too, no host runs it: the next turn fails over to another host's gateway
    agent, "chatter" on a, and says so."""
    host_c = cluster_host(folder, redis_server.url, "c")
    host_d: HostProcess | None = None
    try:
        deploy(host_c, CHATTER, name="helper")
        published(host_c, "helper")
        session = open_session(host_b, agent="helper")
        talk = Conversation(host_b, session.id)
        assert reply_text(talk.turn("one")) == "helper heard: one"
        taken_by(host_c, f"{session.id}.1.reply")
        host_d = cluster_host(folder, redis_server.url, "d")
        deploy(host_d, CHATTER, name="helper")
        published(host_d, "helper")
        assert host_c.stop() == 0
        second = talk.turn("two")
        assert reply_text(second) == "helper heard: two"
        assert "agent_failover" not in kinds(second)
        taken_by(host_d, f"{session.id}.2.reply")
        assert host_d.stop() == 0
        third = talk.turn("three")
        failover = of(third, "agent_failover")
        assert [(f.from_agent, f.to_agent, f.reason) for f in failover] == [
            ("helper", "chatter", "agent_removed")
        ]
        assert reply_text(third) == "chatter heard: three"
        taken_by(host_a, f"{session.id}.3.reply")
        talk.close()
    finally:
        host_c.stop()
        if host_d is not None:
            host_d.stop()


def test_a_session_whose_host_was_killed_is_continued_on_another(
    folder: Path, redis_server: RedisServer, host_a: HostProcess, host_b: HostProcess
) -> None:
    """Opened on e, which is then killed with SIGKILL: once e has dropped out of the directory,
    b takes the session over without asking e, with the context e last answered for, and
    continues it."""
    host_e = cluster_host(folder, redis_server.url, "e")
    try:
        session = open_session(host_e, agent="chatter", context={"n": 1})
        talk = Conversation(host_e, session.id)
        assert reply_text(talk.turn("remember city oslo")) == "remembered city at version 2"
        talk.close()
        host_e.process.kill()  # kill -9: e writes nothing more, and says no goodbye
        host_e.process.wait(30)
        host_b.wait_for_log(
            lambda r: r.get("event") == "cluster host left" and r.get("host") == "e", 60
        )
        on_b = Conversation(host_b, session.id)
        assert reply_text(on_b.turn("after e")) == "chatter heard: after e"
        on_b.close()
        assert context_of(host_b, session.id) == ({"n": 1, "city": "oslo"}, 2)
    finally:
        host_e.stop()


def test_a_host_paused_while_its_session_was_taken_over_cannot_write_it(
    folder: Path, redis_server: RedisServer, host_a: HostProcess, host_b: HostProcess
) -> None:
    """Host f holds a session, then is paused (SIGSTOP) long enough to drop out of the
    directory: b takes the session over and continues it. Resumed (SIGCONT), f still has its
    copy and a stream on it; a message sent there does not reach the session b holds: f's
    writes are fenced, f lets its copy go, and its stream ends UNAVAILABLE."""
    host_f = cluster_host(folder, redis_server.url, "f")
    try:
        session = open_session(host_f, agent="chatter")
        # Its deadline covers f's pause and the dropout on a loaded machine too.
        on_f = Conversation(host_f, session.id, timeout=600)
        assert reply_text(on_f.turn("remember owner f")) == "remembered owner at version 2"
        os.kill(host_f.process.pid, signal.SIGSTOP)
        try:
            host_b.wait_for_log(
                lambda r: r.get("event") == "cluster host left" and r.get("host") == "f", 60
            )
            on_b = Conversation(host_b, session.id)
            assert reply_text(on_b.turn("remember owner b")) == "remembered owner at version 3"
        finally:
            os.kill(host_f.process.pid, signal.SIGCONT)
        on_f.say("remember owner f-again")
        with pytest.raises(grpc.RpcError) as ended:
            on_f.rest()
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
        host_f.wait_for_log(
            lambda r: r.get("event") == "cluster: a session another host took over is let go", 60
        )
        assert context_of(host_b, session.id) == ({"owner": "b"}, 3)
        after = on_b.turn("still here")
        assert reply_text(after) == "chatter heard: still here"
        on_b.close()
    finally:
        host_f.stop()


def test_a_pipeline_step_runs_on_an_agent_another_host_runs(
    host_a: HostProcess, host_b: HostProcess
) -> None:
    """A session opened on b with a pipeline step on "chatter", which only a runs: the step is
    checked against a's agents at opening, runs on a with the host keys its schema accepts, and
    its output lands in the context; a step on an agent no host runs is refused at opening."""
    echo = gateway_pb2.PipelineStep(
        name="echo", agent="chatter", action="respond", output_key="echoed"
    )
    session = open_session(host_b, agent="chatter", pipeline=gateway_pb2.PipelineSpec(steps=[echo]))
    talk = Conversation(host_b, session.id)
    events = talk.turn("hi")
    talk.close()
    assert [s.agent for s in of(events, "step_completed")] == ["chatter", "chatter"]
    assert reply_text(events) == "chatter heard: hi"
    document, _ = context_of(host_b, session.id)
    assert document["echoed"] == {"text": "chatter heard: hi", "turn": 1, "steps": []}
    ghost = gateway_pb2.PipelineStep(name="x", agent="ghost")
    with pytest.raises(grpc.RpcError) as refused:
        open_session(host_b, agent="chatter", pipeline=gateway_pb2.PipelineSpec(steps=[ghost]))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violations = details(refused.value)["BadRequest"].field_violations
    assert [v.field for v in violations] == ["pipeline.steps[0].agent"]
    assert "no agent named 'ghost'" in violations[0].description


def test_context_watched_on_b_follows_the_session_there(
    host_a: HostProcess, host_b: HostProcess
) -> None:
    """WatchContext on b of a session opened on a brings it to b: a snapshot, then b's changes;
    a change made on a takes it back there, and b's watch ends UNAVAILABLE naming a."""
    session = open_session(host_a, agent="chatter", context={"step": 0})
    watch = host_b.gateway.WatchContext(
        gateway_pb2.WatchContextRequest(session_id=session.id), timeout=60
    )
    first = next(watch)
    assert (first.WhichOneof("event"), first.snapshot.version) == ("snapshot", 1)
    on_b = gateway_pb2.UpdateContextRequest(session_id=session.id, set=struct({"step": 1}))
    assert host_b.gateway.UpdateContext(on_b, timeout=30).change.version == 2
    change = next(watch).change
    assert (change.version, json_format.MessageToDict(change.values)) == (2, {"step": 1})
    on_a = gateway_pb2.UpdateContextRequest(session_id=session.id, set=struct({"step": 2}))
    assert host_a.gateway.UpdateContext(on_a, timeout=30).change.version == 3
    with pytest.raises(grpc.RpcError) as moved:
        list(watch)
    assert moved.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "moved to host a" in (moved.value.details() or "")


def test_sessions_are_written_again_when_redis_comes_back_empty(
    redis_server: RedisServer, host_a: HostProcess, host_b: HostProcess
) -> None:
    """Redis stopped, then started again empty (it saves nothing), under a session a holds: a
    writes the session again, whole, so b reads its context as a last answered for it and takes
    it over with all its events. (Last in the module: it empties Redis.)"""
    session = open_session(host_a, agent="chatter", context={"kept": True})
    talk = Conversation(host_a, session.id)
    first = talk.turn("remember mood fine")
    talk.close()
    redis_server.stop()
    try:
        host_a.wait_for_log(lambda r: r.get("event", "").startswith("cluster degraded"), 60)
    finally:
        redis_server.start()  # the same port, empty
    host_a.wait_for_log(
        lambda r: r.get("event") == "cluster sessions written again: Redis came back empty", 60
    )
    host_b.wait_for_log(lambda r: r.get("event") == "cluster recovered", 60)
    assert context_of(host_b, session.id) == ({"kept": True, "mood": "fine"}, 2)
    # b takes it over with every event a showed, under the same numbers.
    on_b = Conversation(host_b, session.id, after=0)
    replayed = [on_b.next() for _ in first]
    on_b.close()
    assert [(e.sequence, e.WhichOneof("event")) for e in replayed] == [
        (e.sequence, e.WhichOneof("event")) for e in first
    ]
