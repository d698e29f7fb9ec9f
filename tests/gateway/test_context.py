"""The session context: a versioned JSON blackboard shared by the client and agents."""

from __future__ import annotations

import threading
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import details, nested, struct
from tests.support.host import HostProcess

from ._support import Conversation, of, open_session, reply_text


@pytest.fixture(scope="module")
def chatter(host: HostProcess) -> str:
    return deploy(host, AGENTS / "chatter")


def _get(host: HostProcess, session_id: str, *keys: str) -> tuple[dict[str, Any], int]:
    response = host.gateway.GetContext(
        gateway_pb2.GetContextRequest(session_id=session_id, keys=keys), timeout=10
    )
    return json_format.MessageToDict(response.context), response.version


def _update(
    host: HostProcess, session_id: str, expected: int | None = None, **update: Any
) -> gateway_pb2.ContextChange:
    request = gateway_pb2.UpdateContextRequest(session_id=session_id)
    if expected is not None:
        request.expected_version = expected
    for kind, value in update.items():
        if kind == "remove":
            request.remove.keys.extend(value)
        else:
            getattr(request, kind).CopyFrom(struct(value))
    return host.gateway.UpdateContext(request, timeout=10).change  # type: ignore[no-any-return]


def test_initial_context_is_version_one(host: HostProcess, chatter: str) -> None:
    session = open_session(host, agent=chatter, context={"user": {"name": "Ada"}, "lang": "en"})
    assert _get(host, session.id) == ({"user": {"name": "Ada"}, "lang": "en"}, 1)
    assert _get(host, session.id, "lang", "missing") == ({"lang": "en"}, 1)


def test_every_kind_of_update_reports_its_keys(host: HostProcess, chatter: str) -> None:
    session = open_session(host, agent=chatter, context={"a": 1, "nested": {"x": 1, "y": 2}})
    changed = _update(host, session.id, set={"b": 2, "a": 1})
    assert (changed.version, list(changed.keys), changed.author) == (2, ["b"], "local")
    patched = _update(host, session.id, merge_patch={"nested": {"y": None, "z": 3}})
    assert (patched.version, list(patched.keys)) == (3, ["nested"])
    assert _get(host, session.id)[0]["nested"] == {"x": 1, "z": 3}
    removed = _update(host, session.id, remove=["b", "never-there"])
    assert (removed.version, list(removed.keys), json_format.MessageToDict(removed.values)) == (
        4,
        ["b"],
        {},
    )
    replaced = _update(host, session.id, replace={"only": True})
    assert (replaced.version, list(replaced.keys)) == (5, ["a", "nested", "only"])
    assert _get(host, session.id) == ({"only": True}, 5)


def test_an_update_that_changes_nothing_keeps_the_version(host: HostProcess, chatter: str) -> None:
    session = open_session(host, agent=chatter, context={"a": 1})
    unchanged = _update(host, session.id, set={"a": 1})
    assert (unchanged.version, list(unchanged.keys)) == (1, [])
    assert _get(host, session.id)[1] == 1


def test_stale_version_is_aborted_and_changes_nothing(host: HostProcess, chatter: str) -> None:
    """Compare-and-set: the loser of a race learns the current version; nothing is lost."""
    session = open_session(host, agent=chatter, context={"count": 0})
    winner = _update(host, session.id, expected=1, set={"count": 1})
    assert winner.version == 2
    with pytest.raises(grpc.RpcError) as error:
        _update(host, session.id, expected=1, set={"count": 100})
    assert error.value.code() == grpc.StatusCode.ABORTED
    info = details(error.value)["ErrorInfo"]
    assert info.reason == "VERSION_CONFLICT" and info.metadata["current_version"] == "2"
    assert _get(host, session.id) == ({"count": 1}, 2)


def test_bad_updates_are_refused(host: HostProcess, chatter: str) -> None:
    session = open_session(host, agent=chatter)
    with pytest.raises(grpc.RpcError) as nothing:
        host.gateway.UpdateContext(
            gateway_pb2.UpdateContextRequest(session_id=session.id), timeout=10
        )
    assert nothing.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as empty_key:
        _update(host, session.id, set={"": 1})
    assert empty_key.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as too_big:
        _update(host, session.id, set={"blob": "x" * (1024 * 1024 + 1)})
    assert too_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert details(too_big.value)["ErrorInfo"].reason == "CONTEXT_TOO_LARGE"
    assert _get(host, session.id) == ({}, 1)


def test_watch_gets_a_snapshot_then_each_change_and_the_close(
    host: HostProcess, chatter: str
) -> None:
    session = open_session(host, agent=chatter, context={"step": 0})
    stream = host.gateway.WatchContext(
        gateway_pb2.WatchContextRequest(session_id=session.id), timeout=30
    )
    first = next(stream)
    assert first.WhichOneof("event") == "snapshot" and first.snapshot.version == 1
    for step in (1, 2, 3):
        _update(host, session.id, set={"step": step})
    changes = [next(stream) for _ in range(3)]
    host.gateway.CloseSession(
        gateway_pb2.CloseSessionRequest(session_id=session.id, reason="done"), timeout=10
    )
    rest = list(stream)
    assert [(c.change.version, c.change.values["step"]) for c in changes] == [
        (2, 1),
        (3, 2),
        (4, 3),
    ]
    assert [r.WhichOneof("event") for r in rest] == ["session_closed"]
    assert rest[0].session_closed.reason == "done"


def test_watch_resumes_after_a_version_without_a_snapshot(host: HostProcess, chatter: str) -> None:
    session = open_session(host, agent=chatter)
    for step in range(1, 5):
        _update(host, session.id, set={"step": step})
    request = gateway_pb2.WatchContextRequest(session_id=session.id, after_version=3)
    stream = host.gateway.WatchContext(request, timeout=30)
    got = [next(stream), next(stream)]
    stream.cancel()
    assert [(e.WhichOneof("event"), e.change.version) for e in got] == [
        ("change", 4),
        ("change", 5),
    ]


def test_agent_writes_reach_the_client_with_the_changed_keys(
    host: HostProcess, chatter: str
) -> None:
    """An agent's ctx.put during a turn is a context_changed event of that turn, by agent:<name>."""
    session = open_session(host, agent=chatter, context={"seen": []})
    watch = host.gateway.WatchContext(
        gateway_pb2.WatchContextRequest(session_id=session.id), timeout=30
    )
    assert next(watch).snapshot.version == 1
    talk = Conversation(host, session.id)
    events = talk.turn("remember mood calm")
    talk.close()
    change = of(events, "context_changed")[0]
    assert (change.version, list(change.keys), change.author) == (2, ["mood"], f"agent:{chatter}")
    assert change.values["mood"] == "calm"
    assert {e.turn for e in events} == {1}
    watched = next(watch)
    watch.cancel()
    assert watched.change.SerializeToString() == change.SerializeToString()
    assert _get(host, session.id, "mood") == ({"mood": "calm"}, 2)


def test_agent_conflict_is_reported_to_the_agent_not_lost(host: HostProcess, chatter: str) -> None:
    session = open_session(host, agent=chatter, context={"k": "first"})
    _update(host, session.id, set={"k": "client"})  # version 2
    talk = Conversation(host, session.id)
    stale = talk.turn("cas k agent 1")
    fresh = talk.turn("cas k agent 2")
    talk.close()
    assert reply_text(stale).startswith("conflict: the context is at version 2, not 1")
    assert reply_text(fresh) == "written at version 3"
    assert _get(host, session.id) == ({"k": "agent"}, 3)


def test_agent_write_over_the_limit_is_refused(host: HostProcess, chatter: str) -> None:
    session = open_session(host, agent=chatter, context={"small": 1})
    talk = Conversation(host, session.id)
    events = talk.turn("oversize")
    talk.close()
    assert reply_text(events) == "refused: context_too_large"
    assert _get(host, session.id) == ({"small": 1}, 1)


def test_a_write_nesting_deeper_than_a_value_carries_is_refused(
    host: HostProcess, chatter: str
) -> None:
    """docs/limits.md, "Gateway": a context value nests at most 90 protobuf levels (the
    context an object of 3, each list 2: 43 lists under a key), since clients read the context
    as a Struct. A write past it -- an agent's ctx.put, a client's UpdateContext -- is refused
    INVALID_ARGUMENT `CONTEXT_TOO_DEEP` naming the key, and nothing changes, so the context
    stays readable. (Before, the write was kept, and every later GetContext answered a note in
    place of the whole context: a read-modify-write would have lost it.)"""
    session = open_session(host, agent=chatter, context={"small": 1})
    talk = Conversation(host, session.id)
    kept, refused = talk.turn("nest 43"), talk.turn("nest 44")
    talk.close()
    assert reply_text(kept) == "nested at version 2"
    assert reply_text(refused).startswith("refused: context_too_deep: the context's key 'deep'")
    assert _get(host, session.id) == ({"small": 1, "deep": nested(43)}, 2)

    with pytest.raises(grpc.RpcError) as error:
        _update(host, session.id, merge_patch={"deeper": {"a": nested(43)}})
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info = details(error.value)["ErrorInfo"]
    assert (info.reason, dict(info.metadata)) == (
        "CONTEXT_TOO_DEEP",
        {"key": "deeper", "limit": "90"},
    )
    assert [v.field for v in details(error.value)["BadRequest"].field_violations] == [
        "merge_patch.deeper"
    ]
    assert _get(host, session.id) == ({"small": 1, "deep": nested(43)}, 2)

    with pytest.raises(grpc.RpcError) as error:
        open_session(host, agent=chatter, context={"deep": nested(44)})
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(error.value)["ErrorInfo"].reason == "CONTEXT_TOO_DEEP"


def test_closed_session_context_is_read_only(host: HostProcess, chatter: str) -> None:
    session = open_session(host, agent=chatter, context={"kept": "yes"})
    host.gateway.CloseSession(gateway_pb2.CloseSessionRequest(session_id=session.id), timeout=10)
    with pytest.raises(grpc.RpcError) as error:
        _update(host, session.id, set={"kept": "no"})
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert _get(host, session.id) == ({"kept": "yes"}, 1)


def test_concurrent_compare_and_set_loses_no_increment(host: HostProcess, chatter: str) -> None:
    """Eight writers increment one counter with read-modify-CAS-retry: the result is exact."""
    session = open_session(host, agent=chatter, context={"n": 0})
    unexpected: list[grpc.StatusCode] = []

    def writer() -> None:
        for _ in range(10):
            while True:
                document, version = _get(host, session.id)
                try:
                    _update(host, session.id, expected=version, set={"n": document["n"] + 1})
                    break
                except grpc.RpcError as error:
                    if error.code() != grpc.StatusCode.ABORTED:
                        unexpected.append(error.code())
                        return

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not unexpected
    assert _get(host, session.id) == ({"n": 80}, 81)
