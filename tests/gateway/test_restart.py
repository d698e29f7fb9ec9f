"""Nothing lost across a restart: sessions with their context and events, mailboxes and topics
come back when a host starts on the state directory of one that stopped (SIGTERM) or was killed
(kill -9); a turn cut short ends with an error `host_restarted`, and the session goes on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import gateway_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import data, details, execute, struct
from tests.support.host import HostProcess
from tests.workflows.test_restart import restart

from ._support import Conversation, kinds, of, open_session, reply_text, send, subscribe

TOOLBOX = AGENTS / "toolbox"
HANDLER = {"TOOLBOX_ON_MESSAGE": "1"}  # the toolbox republishes each message on <name>.received
STOPS = pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "kill-9"])


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[list[HostProcess]]:
    """Hosts of one test, on one state directory; every one is stopped at the end."""
    started = [HostProcess(tmp_path / "state")]
    try:
        started[0].wait_serving()
        yield started
    finally:
        for host in started:
            host.stop()


def again(hosts: list[HostProcess], kill: bool) -> HostProcess:
    hosts.append(restart(hosts[-1], kill=kill))
    return hosts[-1]


def context(host: HostProcess, session_id: str) -> gateway_pb2.GetContextResponse:
    request = gateway_pb2.GetContextRequest(session_id=session_id)
    return host.gateway.GetContext(request, timeout=10)  # type: ignore[no-any-return]


def update(host: HostProcess, session_id: str, version: int, **values: Any) -> int:
    request = gateway_pb2.UpdateContextRequest(
        session_id=session_id, set=struct(values), expected_version=version
    )
    return host.gateway.UpdateContext(request, timeout=10).change.version  # type: ignore[no-any-return]


def published(stream: Any, count: int) -> list[gateway_pb2.SubscribeResponse]:
    return [next(stream) for _ in range(count)]


def publish(host: HostProcess, topic: str, payload: Any) -> gateway_pb2.AgentMessage:
    request = gateway_pb2.PublishRequest(topic=topic, type="headline")
    json_format.ParseDict(payload, request.data)
    return host.gateway.Publish(request, timeout=10).message  # type: ignore[no-any-return]


@STOPS
def test_a_session_resumes_with_its_events_context_and_turns(
    hosts: list[HostProcess], kill: bool
) -> None:
    """GetSession, a Converse resumed from the last event seen (the same events under the same
    numbers), the context at its version and a compare-and-set at it; the turn running when
    the host went down ends `host_restarted` and the next one runs."""
    host = hosts[0]
    deploy(host, AGENTS / "chatter")
    session = open_session(host, agent="chatter", context={"user": "ada"})
    talk = Conversation(host, session.id)
    first = talk.turn("remember color blue")
    assert reply_text(talk.turn("hello", client_message_id="m-2")) == "chatter heard: hello"
    assert update(host, session.id, 2, mood="calm") == 3
    talk.say("hang")  # still running when the host goes down
    talk.until(lambda e: e.WhichOneof("event") == "accepted" and e.turn == 3)
    talk.close()
    before = [(e.sequence, e.WhichOneof("event"), e.turn) for e in talk.events]
    resume_after = first[-1].sequence

    host = again(hosts, kill)
    watch_until(host, "chatter", {"RUNNING"})  # deployed before the restart, back by itself
    got = host.gateway.GetSession(
        gateway_pb2.GetSessionRequest(session_id=session.id), timeout=10
    ).session
    assert (got.state, got.turns, got.context_version) == (gateway_pb2.SESSION_STATE_OPEN, 3, 3)
    assert got.last_sequence == before[-1][0] + 2  # the ended turn: error, turn_completed

    resumed = Conversation(host, session.id, after=resume_after)
    replay = resumed.until(lambda e: e.WhichOneof("event") == "turn_completed" and e.turn == 3)
    seen = [(e.sequence, e.WhichOneof("event"), e.turn) for e in replay]
    assert seen[: len(before) - len(first)] == [b for b in before if b[0] > resume_after]
    assert [s[0] for s in seen] == list(range(resume_after + 1, got.last_sequence + 1))
    assert kinds(replay[-2:]) == ["error", "turn_completed"]
    stopped = of(replay, "error")[-1]
    assert (stopped.error.code, stopped.error.retryable) == ("host_restarted", True)

    resumed.say("hello", client_message_id="m-2")  # a retry after reconnecting: not run again
    assert resumed.until(lambda e: e.WhichOneof("event") == "accepted")[-1].turn == 2
    fresh = resumed.turn("still there?")
    assert (fresh[0].turn, fresh[0].sequence) == (4, got.last_sequence + 2)
    assert reply_text(fresh) == "chatter heard: still there?"
    resumed.close()

    read = context(host, session.id)
    assert read.version == 3
    assert json_format.MessageToDict(read.context) == {
        "user": "ada",
        "color": "blue",
        "mood": "calm",
    }
    assert update(host, session.id, 3, mood="glad") == 4
    with pytest.raises(grpc.RpcError) as stale:
        update(host, session.id, 3, mood="late")
    assert stale.value.code() == grpc.StatusCode.ABORTED
    assert details(stale.value)["ErrorInfo"].metadata["current_version"] == "4"


@STOPS
def test_messages_are_delivered_once_and_topics_kept(hosts: list[HostProcess], kill: bool) -> None:
    """An accepted, undelivered message reaches its agent after the restart; one delivered or
    received before it does not come again; a topic's history is still there, numbered on; so
    is the egress audit log."""
    host = hosts[0]
    deploy(host, TOOLBOX, name="early", env=HANDLER)
    deploy(host, TOOLBOX, name="inbox")  # no handler: its messages wait
    early = subscribe(host, topic="early.received", after=0)
    delivered = send(host, "early", "note", {"n": 0}).message.id
    assert data_of(next(early))["id"] == delivered
    early.cancel()
    host.wait_for_log(
        lambda r: r.get("event") == "message delivered" and r.get("message") == delivered
    )
    taken = send(host, "inbox", "note", {"n": 1}).message.id
    waiting = send(host, "inbox", "note", {"n": 2}).message.id
    got = data(execute(host, "inbox", "receive", {"max_messages": 1}))
    assert [m["id"] for m in got] == [taken]
    news = [publish(host, "news", {"n": n}) for n in (1, 2)]
    execute(host, "inbox", "subscribe", {"topic": "news"})  # later news lands in its mailbox
    refused = execute(host, "inbox", "get", {"url": "http://127.0.0.1:9/"})  # deny by default
    assert refused.error.code == "host_not_allowed"

    host = again(hosts, kill)
    inbox = subscribe(host, topic="inbox.received", after=0)
    # Now it consumes: deployed again with the handler (it came back as it was, without one).
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name="inbox"), timeout=60)
    deploy(host, TOOLBOX, name="inbox", env=HANDLER)
    assert data_of(next(inbox))["id"] == waiting
    marker = send(host, "inbox", "note", {"n": 3}).message.id
    assert data_of(next(inbox))["id"] == marker  # `waiting` once, `taken` never

    early = subscribe(host, topic="early.received", after=0)
    first = next(early)
    assert (first.message.sequence, data_of(first)["id"]) == (1, delivered)
    watch_until(host, "early", {"RUNNING"})  # back by itself, with its handler
    after = send(host, "early", "note", {"n": 4}).message.id
    second = next(early)
    assert (second.message.sequence, data_of(second)["id"]) == (2, after)  # not `delivered` again
    early.cancel()

    history = subscribe(host, topic="news", after=0)
    kept = published(history, 2)
    history.cancel()
    assert [(m.message.id, m.message.sequence) for m in kept] == [(n.id, n.sequence) for n in news]
    assert publish(host, "news", {"n": 3}).sequence == 3
    copied = data_of(next(inbox))  # the agent's subscription to the topic was kept
    inbox.cancel()
    assert (copied["type"], copied["data"]) == ("headline", {"n": 3})

    audit = host.gateway.ListAudit(gateway_pb2.ListAuditRequest(agent="inbox"), timeout=10)
    assert [(r.reason, r.port) for r in audit.records] == [("host_not_allowed", 9)]


def data_of(response: gateway_pb2.SubscribeResponse) -> dict[str, Any]:
    return json_format.MessageToDict(response.message.data)
