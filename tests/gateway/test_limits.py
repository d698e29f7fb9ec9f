"""Session limits from the host's [gateway] table: retained events, sessions per caller, the turn
queue, idle timeout, and what a host shutdown does to open streams."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import details
from tests.support.host import HostProcess

from ._support import Conversation, close_session, gateway_host, kinds, of, open_session, reply_text


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    config = "[gateway]\nevent_history = 20\nmax_sessions_per_owner = 3\nturn_queue = 1\n"
    with gateway_host(tmp_path_factory.mktemp("gateway-limits"), config) as host:
        yield host


def test_resuming_before_the_retained_events_is_out_of_range(limited: HostProcess) -> None:
    session = open_session(limited, agent="chatter")
    talk = Conversation(limited, session.id)
    events = talk.turn("chunks 10") + talk.turn("chunks 10")
    talk.close()
    assert events[-1].sequence > 20
    late = Conversation(limited, session.id, after=0)
    with pytest.raises(grpc.RpcError) as error:
        late.next()
    assert error.value.code() == grpc.StatusCode.OUT_OF_RANGE
    first = int(details(error.value)["ErrorInfo"].metadata["first_sequence"])
    assert first == events[-1].sequence - 19
    resumed = Conversation(limited, session.id, after=first - 1)
    assert resumed.next().sequence == first
    resumed.close()
    close_session(limited, session.id)


def test_sessions_per_caller_are_bounded(limited: HostProcess) -> None:
    opened = [open_session(limited, agent="chatter").id for _ in range(3)]
    with pytest.raises(grpc.RpcError) as error:
        open_session(limited, agent="chatter")
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    found = details(error.value)
    assert found["ErrorInfo"].reason == "TOO_MANY_SESSIONS_FOR_CALLER"
    assert found["ErrorInfo"].metadata["setting"] == "max_sessions_per_owner"
    assert found["QuotaFailure"].violations[0].subject == "owner:local"
    close_session(limited, opened[0])
    opened.append(open_session(limited, agent="chatter").id)
    for session_id in opened[1:]:
        close_session(limited, session_id)


def test_a_full_turn_queue_ends_the_stream_and_spares_the_session(limited: HostProcess) -> None:
    """One turn runs, one waits; a third is refused (TURN_QUEUE_FULL) and only that stream ends."""
    pipeline = gateway_pb2.PipelineSpec(turn_timeout=duration_pb2.Duration(seconds=1))
    session = open_session(limited, agent="chatter", pipeline=pipeline)
    watcher = Conversation(limited, session.id)
    talk = Conversation(limited, session.id)
    talk.say("hang")
    talk.until(lambda e: e.WhichOneof("event") == "accepted")
    talk.say("queued")
    talk.until(lambda e: e.WhichOneof("event") == "accepted")
    talk.say("one too many")
    with pytest.raises(grpc.RpcError) as error:
        talk.rest()
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    found = details(error.value)
    assert found["ErrorInfo"].reason == "TURN_QUEUE_FULL" and "RetryInfo" in found
    assert found["QuotaFailure"].violations[0].subject == f"session:{session.id}"
    seen = watcher.until(lambda e: e.WhichOneof("event") == "turn_completed" and e.turn == 2)
    watcher.close()
    assert [r.text for r in of(seen, "reply")] == ["chatter heard: queued"]
    again = Conversation(limited, session.id)
    assert reply_text(again.turn("fine")) == "chatter heard: fine"
    again.close()
    close_session(limited, session.id)


def test_idle_session_closes_itself(limited: HostProcess) -> None:
    session = open_session(limited, agent="chatter", idle_timeout=duration_pb2.Duration(seconds=1))
    watch = limited.gateway.WatchContext(
        gateway_pb2.WatchContextRequest(session_id=session.id), timeout=30
    )
    events = list(watch)
    assert [e.WhichOneof("event") for e in events] == ["snapshot", "session_closed"]
    assert events[-1].session_closed.reason == "idle_timeout"
    got = limited.gateway.GetSession(
        gateway_pb2.GetSessionRequest(session_id=session.id), timeout=10
    ).session
    assert got.state == gateway_pb2.SESSION_STATE_CLOSED


def test_host_shutdown_ends_streams_unavailable_and_keeps_the_session(tmp_path: Path) -> None:
    """The session is not closed by a shutdown (the next host has it, tests/gateway/
    test_restart.py): its stream ends UNAVAILABLE HOST_STOPPING, the sign to resume elsewhere."""
    host = HostProcess(tmp_path / "state")
    try:
        host.wait_serving()
        deploy(host, AGENTS / "chatter")
        session = open_session(host, agent="chatter")
        talk = Conversation(host, session.id)
        assert reply_text(talk.turn("before")) == "chatter heard: before"
        watch = host.gateway.WatchContext(
            gateway_pb2.WatchContextRequest(session_id=session.id), timeout=30
        )
        assert next(watch).WhichOneof("event") == "snapshot"
        host.process.send_signal(signal.SIGTERM)
        for stream in (talk.rest, lambda: list(watch)):
            with pytest.raises(grpc.RpcError) as error:
                stream()
            assert error.value.code() == grpc.StatusCode.UNAVAILABLE
            info = details(error.value).get("ErrorInfo")
            assert info is not None and info.reason == "HOST_STOPPING", error.value
        assert "session_closed" not in kinds(talk.events)
        assert host.process.wait(60) == 0
    finally:
        host.stop()
