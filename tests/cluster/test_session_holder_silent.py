"""A session whose holder is listed but does not answer (docs/cluster.md, "The gateway across
hosts", sessions): "one listed but not answering within 15 seconds makes the call
`UNAVAILABLE`, and the next call takes the session without asking".

Real hosts a and b of one cluster on a real redis-server; the gateway agent "chatter" runs on b
only, so nothing b does for the session needs a once a is frozen. Both hosts stay in the
directory for DROPOUT seconds after their last heartbeat (longer than the suite's usual 5 s): a,
frozen with SIGSTOP, is still listed for the whole test, so b must ask it, and the call that
gets no answer is the case under test, not a host that dropped out."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import gateway_pb2
from tests.cluster.support import cluster_host, published
from tests.gateway._support import Conversation, kinds, open_session, reply_text
from tests.support.agents import AGENTS, deploy
from tests.support.calls import details
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture

# Seconds a frozen host stays listed: well past the 15 s b gives it, plus a loaded machine's slack.
DROPOUT = 120.0
LONG = {"ETHER_CLUSTER_DROPOUT": str(DROPOUT)}


@pytest.fixture(scope="module")
def hosts(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer
) -> Iterator[tuple[HostProcess, HostProcess]]:
    folder: Path = tmp_path_factory.mktemp("silent-holder")
    started: list[HostProcess] = []
    try:
        started.append(cluster_host(folder, redis_server.url, "a", env=LONG))
        started.append(cluster_host(folder, redis_server.url, "b", env=LONG))
        deploy(started[1], AGENTS / "chatter")
        published(started[1], "chatter")
        yield started[0], started[1]
    finally:
        for host in started:
            host.stop()


def test_a_frozen_holder_makes_one_call_unavailable_and_the_next_takes_the_session(
    hosts: tuple[HostProcess, HostProcess],
) -> None:
    """A session opened and talked to on a; a is then frozen (SIGSTOP) while still listed.
    Continuing the session on b: the first Converse ends UNAVAILABLE, naming a, once a has not
    answered within 15 s; the next Converse on b (a still frozen) takes the session without
    asking a, and goes on after the last event a showed with no gap, with a's context. Resumed,
    a's own stream of the session ends UNAVAILABLE, and a reads what b wrote."""
    host_a, host_b = hosts
    session = open_session(host_a, agent="chatter", context={"user": "ada"})
    # Its deadline covers a's pause, the 15 s b waits for a, and a loaded machine.
    on_a = Conversation(host_a, session.id, timeout=600)
    first = on_a.turn("remember color blue")  # the agent on b writes the session a holds
    assert reply_text(first) == "remembered color at version 2"
    last = first[-1].sequence  # what a showed (and wrote to Redis) before it answered
    os.kill(host_a.process.pid, signal.SIGSTOP)
    try:
        # A client continuing on b, after the last event it saw on a.
        refused = Conversation(host_b, session.id, after=last, timeout=120)
        with pytest.raises(grpc.RpcError) as silent:
            refused.turn("hello from b")
        refused.close()
        assert silent.value.code() == grpc.StatusCode.UNAVAILABLE
        message = silent.value.details() or ""
        assert "host a did not answer" in message and "15 s" in message, message
        info = details(silent.value)["ErrorInfo"]  # one rule with WatchEvents' silent host
        assert (info.reason, info.metadata["host"]) == ("HOST_UNAVAILABLE", "a"), info

        # The same again on b, a still frozen and listed: this time b does not ask a (asking
        # would wait 15 s more and end UNAVAILABLE again), it takes the session.
        on_b = Conversation(host_b, session.id, after=last, timeout=120)
        second = on_b.turn("remember size large")
        assert reply_text(second) == "remembered size at version 3", kinds(second)
        # Numbering goes on from a's last event: no gap, no repeat.
        assert [e.sequence for e in second] == list(range(last + 1, last + 1 + len(second)))
        assert [e.turn for e in second if e.WhichOneof("event") == "accepted"] == [2]
        on_b.close()
        host_b.wait_for_log(
            lambda r: r.get("event") == "session brought here" and r.get("session") == session.id
        )
        # a was listed throughout: b never took the session as from a host gone.
        assert not [
            r
            for r in host_b.records
            if r.get("event") == "cluster session taken from a host gone"
            and r.get("session") == session.id
        ]
    finally:
        os.kill(host_a.process.pid, signal.SIGCONT)
    # a, resumed, lets its copy go (b's request, still on a's stream, or its first write fenced).
    with pytest.raises(grpc.RpcError) as ended:
        on_a.rest()
    assert ended.value.code() == grpc.StatusCode.UNAVAILABLE, ended.value.details()
    # And a reads the session as b left it.
    got = host_a.gateway.GetContext(
        gateway_pb2.GetContextRequest(session_id=session.id), timeout=30
    )
    assert got.version == 3
    assert dict(got.context) == {"user": "ada", "color": "blue", "size": "large"}
