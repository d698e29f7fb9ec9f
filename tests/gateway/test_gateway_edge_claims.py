"""Edge claims of docs/gateway.md and docs/limits.md no other test asserted, on one real host
with real agents (tests/agents/chatter, toolbox) and real gRPC clients:

- gateway.md, "Context": an agent's `ctx.*` host calls with bad params come back as reply
  errors named by reason (the same reasons a client's UpdateContext gets), and change nothing;
  the result shapes `{context, version}`, `{version, keys, changed}` and `{sequence}`; a task
  with no session gets `no_session`; a closed session's context is read-only to agents too
  (`session_closed`). The tasks are `on_message` deliveries of messages about a session, which
  the section lets use `ctx.*` on it.
- gateway.md, "Messages and topics": an agent's message may name only the session its task
  runs for (`session_not_allowed` otherwise).
- limits.md, "nesting of what an agent answered": gateway events (a custom `emit`, a reply
  chunk's data) and topic messages whose data nests past 90 protobuf levels reach the client
  as a text note in place of the value, and the stream goes on, decodable (also on replay).
- gateway.md, "Audit": "A record that cannot be written fails the fetch" (`audit_unavailable`),
  shown with another process holding the audit log's write lock, as a backup or a `sqlite3`
  shell would.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, details, execute, nested, struct
from tests.support.host import HostProcess

from ._support import (
    Conversation,
    Recorder,
    audit_of,
    close_session,
    fetch,
    of,
    open_session,
    reply_text,
    send,
    subscribe,
)

NOTE = "is not shown here: it nests objects and lists deeper than a protobuf Value can carry"
LOOPBACK_ONLY = {"allow_hosts": ["127.0.0.1"], "allow_addresses": ["127.0.0.1/32"], "burst": 100}


@pytest.fixture(scope="module")
def chatter(host: HostProcess) -> str:
    return deploy(host, AGENTS / "chatter")


@pytest.fixture(scope="module")
def handler(host: HostProcess) -> str:
    """A toolbox whose on_message handler makes the host calls a "host_calls" message lists."""
    return deploy(host, AGENTS / "toolbox", name="ctx-handler", env={"TOOLBOX_ON_MESSAGE": "1"})


def _value(message: Any) -> Any:
    return json_format.MessageToDict(message)


def _context(host: HostProcess, session_id: str) -> tuple[dict[str, Any], int]:
    request = gateway_pb2.GetContextRequest(session_id=session_id)
    answer = host.gateway.GetContext(request, timeout=10)
    return _value(answer.context), answer.version


def _host_calls(
    host: HostProcess, handler: str, calls: list[list[Any]], session_id: str = ""
) -> list[dict[str, Any]]:
    """Send the handler a message (about ``session_id``) listing [method, params] host calls;
    the outcome of each, as the handler republished them on '<handler>.received'."""
    sent = send(host, handler, "host_calls", calls, session_id=session_id).message
    received = subscribe(host, topic=f"{handler}.received", after=0)
    try:
        for event in received:
            report = _value(event.message.data)
            if report["id"] == sent.id:
                return report["outcomes"]  # type: ignore[no-any-return]
    finally:
        received.cancel()
    raise AssertionError("the handler's topic ended")


def _reason(host: HostProcess, session_id: str, **update: Any) -> str:
    """The ErrorInfo reason a client's UpdateContext gets for ``update``."""
    request = gateway_pb2.UpdateContextRequest(session_id=session_id, **update)
    with pytest.raises(grpc.RpcError) as error:
        host.gateway.UpdateContext(request, timeout=10)
    return str(details(error.value)["ErrorInfo"].reason)


def test_bad_ctx_calls_are_reply_errors_named_by_reason_and_change_nothing(
    host: HostProcess, chatter: str, handler: str
) -> None:
    """An agent's ctx.* calls with bad params (keys not a list, no key, a version that is not
    a number, values or a patch that is not an object, an empty key, remove keys not a list, a
    stale version, an emit type not in lower_snake, a reply without text) each get a reply
    error whose code is the reason -- the lower-cased reason a client's UpdateContext gets for
    the same refusal -- and leave the context, its version and the session's events as they
    were; the task goes on and its good calls answer the documented shapes. Checked through an
    on_message delivery of a message about the session, then GetContext and the events."""
    session = open_session(host, agent=chatter, context={"k": "v"})
    empty_key = _reason(host, session.id, set=struct({"": 1}))
    stale = _reason(host, session.id, expected_version=7, set=struct({"k": "w"}))
    assert (empty_key, stale) == ("EMPTY_KEY", "VERSION_CONFLICT")
    bad = [
        ["ctx.get", {"keys": "k"}],
        ["ctx.put", {"value": "w"}],
        ["ctx.put", {"key": "k", "value": "w", "expected_version": "1"}],
        ["ctx.put", {"values": ["k", "w"]}],
        ["ctx.put", {"values": {"": "w"}}],
        ["ctx.patch", {"patch": ["k"]}],
        ["ctx.remove", {"keys": "k"}],
        ["ctx.put", {"key": "k", "value": "w", "expected_version": 7}],
        ["ctx.emit", {"type": "Not Snake", "data": 1}],
        ["ctx.reply", {"data": 1}],
    ]
    good = [
        ["ctx.get", {"keys": ["k", "missing"]}],
        ["ctx.put", {"key": "k", "value": "w", "expected_version": 1}],
        ["ctx.put", {"values": {"k": "w"}}],
        ["ctx.emit", {"type": "note_taken", "data": {"x": 1}}],
    ]
    outcomes = _host_calls(host, handler, bad + good, session.id)
    codes = [o.get("code") for o in outcomes[: len(bad)]]
    assert codes == [
        "invalid_params",
        "invalid_params",
        "invalid_params",
        "invalid_update",
        empty_key.lower(),
        "invalid_update",
        "invalid_update",
        stale.lower(),
        "invalid_params",
        "invalid_params",
    ], outcomes
    assert [o.get("result") for o in outcomes[len(bad) :]] == [
        {"context": {"k": "v"}, "version": 1},
        {"version": 2, "keys": ["k"], "changed": True},
        {"version": 2, "keys": [], "changed": False},
        {"sequence": 2},
    ], outcomes
    assert _context(host, session.id) == ({"k": "w"}, 2)
    got = host.gateway.GetSession(gateway_pb2.GetSessionRequest(session_id=session.id), timeout=10)
    assert got.session.last_sequence == 2  # the write's context_changed, then the one emit
    talk = Conversation(host, session.id, after=0)
    try:
        events = [talk.next(), talk.next()]
    finally:
        talk.close()
    [changed] = of(events, "context_changed")
    assert (list(changed.keys), changed.author) == (["k"], f"agent:{handler}")
    [custom] = of(events, "custom")
    assert (custom.type, custom.agent, _value(custom.data)) == ("note_taken", handler, {"x": 1})


def test_ctx_calls_without_a_session_or_on_a_closed_one(
    host: HostProcess, chatter: str, handler: str
) -> None:
    """A task run for no session gets `no_session` for every ctx.* call. A task run for a
    closed session (a message about it, delivered after CloseSession) still reads its context
    with ctx.get, and each write -- put, patch, remove, emit, reply -- gets `session_closed`,
    the context left as it was."""
    outcomes = _host_calls(host, handler, [["ctx.get", {}], ["ctx.put", {"key": "a", "value": 1}]])
    assert [o.get("code") for o in outcomes] == ["no_session", "no_session"], outcomes

    session = open_session(host, agent=chatter, context={"kept": "yes"})
    close_session(host, session.id)
    writes = [
        ["ctx.put", {"key": "kept", "value": "no"}],
        ["ctx.patch", {"patch": {"kept": None}}],
        ["ctx.remove", {"keys": ["kept"]}],
        ["ctx.emit", {"type": "late_news", "data": 1}],
        ["ctx.reply", {"text": "too late"}],
    ]
    outcomes = _host_calls(host, handler, [["ctx.get", {}], *writes], session.id)
    assert outcomes[0] == {"result": {"context": {"kept": "yes"}, "version": 1}}, outcomes
    assert [o.get("code") for o in outcomes[1:]] == ["session_closed"] * len(writes), outcomes
    assert _context(host, session.id) == ({"kept": "yes"}, 1)


def test_an_agent_message_may_name_only_the_session_its_task_runs_for(
    host: HostProcess, chatter: str, handler: str
) -> None:
    """docs/gateway.md, "Messages and topics": a message may name a `session_id` only of the
    session the sending agent's task runs for. A task run for session A publishes about A; the
    same task naming B (another session of the same owner), and a task run for no session
    naming A, get `session_not_allowed`, and nothing reaches the topic but the message about A."""
    first = open_session(host, agent=chatter)
    other = open_session(host, agent=chatter)
    topic = "sessions.named"
    received = subscribe(host, topic=topic, after=0)
    try:
        about = [
            ["msg.publish", {"topic": topic, "type": "t", "session_id": s}]
            for s in (first.id, other.id)
        ]
        outcomes = _host_calls(host, handler, about, first.id)
        unrelated = _host_calls(host, handler, about[:1])
        marker = execute(host, handler, "publish", {"topic": topic, "type": "marker"})
        assert marker.status == agent_io_pb2.TASK_STATUS_SUCCESS, marker.error
        got = [next(received).message, next(received).message]
    finally:
        received.cancel()
    assert outcomes[0]["result"]["message"]["session_id"] == first.id, outcomes
    assert [o.get("code") for o in outcomes[1:] + unrelated] == ["session_not_allowed"] * 2
    assert [(m.type, m.session_id, m.sender) for m in got] == [
        ("t", first.id, f"agent:{handler}"),
        ("marker", "", f"agent:{handler}"),
    ]


def test_events_nested_too_deep_reach_the_client_as_a_note(host: HostProcess, chatter: str) -> None:
    """docs/limits.md: a custom event's data and a reply chunk's data nesting past 90 protobuf
    levels -- 46 lists, just past, and 100 lists, past what any protobuf decoder reads -- reach
    the Converse client as a text note in their place; each turn goes on to its reply and
    turn_completed on the same stream, 45 lists (90 levels) arrive as they are, and a second
    stream replaying the session from the start decodes every event as the first got it."""
    session = open_session(host, agent=chatter)
    talk = Conversation(host, session.id)
    try:
        turns = {levels: talk.turn(f"emitdeep {levels}") for levels in (46, 100, 45)}
    finally:
        talk.close()
    for levels, events in turns.items():
        [custom] = of(events, "custom")
        [chunk] = [r for r in of(events, "reply") if r.partial]
        assert (custom.type, chunk.text) == ("deep", "deep ")
        assert reply_text(events) == f"emitted {levels} deep"
        assert events[-1].WhichOneof("event") == "turn_completed"
        for value in (_value(custom.data), _value(chunk.data)):
            if levels > 45:
                assert isinstance(value, str) and NOTE in value, value
            else:
                assert value == nested(45)
    replay = Conversation(host, session.id, after=0)
    try:
        again = replay.until(lambda e: e.sequence == talk.events[-1].sequence)
    finally:
        replay.close()
    assert [e.SerializeToString() for e in again] == [e.SerializeToString() for e in talk.events]


def test_a_message_nested_too_deep_reaches_subscribers_as_a_note(host: HostProcess) -> None:
    """docs/limits.md: a message an agent publishes whose data nests past 90 protobuf levels
    (46 lists; 100 lists) reaches a Subscribe stream with a text note as its data; each publish
    succeeds, and the stream goes on: the next message (45 lists: 90 levels) arrives whole."""
    agent = deploy(host, AGENTS / "toolbox", name="deep-publisher")
    received = subscribe(host, topic="deep.news", after=0)
    try:
        for levels in (46, 100, 45):
            output = execute(
                host, agent, "publish", {"topic": "deep.news", "type": "deep", "nest": levels}
            )
            assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
        got = [next(received).message for _ in range(3)]
    finally:
        received.cancel()
    assert [(m.type, m.sender) for m in got] == [("deep", f"agent:{agent}")] * 3
    for message in got[:2]:
        note = _value(message.data)
        assert isinstance(note, str) and NOTE in note, note
    assert _value(got[2].data) == nested(45)


@contextmanager
def _audit_locked(host: HostProcess) -> Iterator[None]:
    """Another process holds the egress audit log's write lock (as a backup tool would)."""
    lock = sqlite3.connect(Path(host.state_dir) / "gateway" / "audit.sqlite3", isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")
        yield
    finally:
        lock.execute("ROLLBACK")
        lock.close()


def test_a_fetch_whose_audit_record_cannot_be_written_fails(
    host: HostProcess, web: Recorder
) -> None:
    """docs/gateway.md, "Audit": a record that cannot be written fails the fetch. With the audit
    log locked by another process, a fetch the policy denies and one it allows each fail with
    `audit_unavailable` (the agent gets no response), and the host logs why; once the lock is
    gone, fetches are answered and audited again, and the log holds no record of the two."""
    agent = deploy(
        host, AGENTS / "toolbox", name="audited", config=struct({"egress": LOOPBACK_ONLY})
    )
    mark = len(host.records)
    with _audit_locked(host):
        denied = fetch(host, agent, web.url("/denied", host="localhost"))
        allowed = fetch(host, agent, web.url("/allowed"))
    for output in (denied, allowed):
        assert output.status == agent_io_pb2.TASK_STATUS_ERROR, data(output)
        assert output.error.code == "audit_unavailable", output.error.message
    host.wait_for_log(
        lambda r: r.get("event") == "audit write failed; refusing the fetch", after=mark
    )
    after = fetch(host, agent, web.url("/after"))
    assert after.status == agent_io_pb2.TASK_STATUS_SUCCESS, after.error
    [record] = audit_of(host, agent)
    assert record.url == web.url("/after") and data(after)["audit_ids"] == [record.id]


def test_a_fetch_that_cannot_be_audited_sends_nothing(host: HostProcess, web: Recorder) -> None:
    """docs/gateway.md, "Audit": every hop of every fetch is one record, and a log that cannot
    be written fails the fetch before its request leaves (audit.py: fail closed). With the audit
    log locked, an allowed fetch does not reach the server, and the agent is told so. (Before,
    the request was sent and answered, and only its record failed, while the agent was told
    "nothing was fetched".)"""
    agent = deploy(
        host, AGENTS / "toolbox", name="unaudited", config=struct({"egress": LOOPBACK_ONLY})
    )
    with _audit_locked(host):
        output = fetch(host, agent, web.url("/unrecorded"))
    assert output.error.code == "audit_unavailable", output.error.message
    assert "nothing was sent" in output.error.message
    assert ("GET", "/unrecorded") not in web.paths
