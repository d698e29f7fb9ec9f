"""WatchEvents across hosts (docs/cluster.md, "Events across hosts"): on any host, following an
agent only another host runs follows it there (the call forwarded to that host, its events and
sequence numbers as it sends them, each naming the host); ``host`` follows a named host; a host
the cluster does not know is NOT_FOUND naming it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.cluster.support import cluster_host, published
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture

RUNNING = agent_io_pb2.AGENT_STATE_RUNNING
STOPPED = agent_io_pb2.AGENT_STATE_STOPPED


@pytest.fixture(scope="module")
def hosts(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer
) -> Iterator[tuple[HostProcess, HostProcess]]:
    folder = tmp_path_factory.mktemp("events")
    a = cluster_host(folder, redis_server.url, "a")
    try:
        b = cluster_host(folder, redis_server.url, "b")
        try:
            deploy(a, AGENTS / "worker", name="on-a")
            published(a, "on-a")
            yield a, b
        finally:
            b.stop()
    finally:
        a.stop()


def _watch(on: HostProcess, **fields: object) -> grpc.Future:
    return on.supervisor.WatchEvents(supervisor_pb2.WatchEventsRequest(**fields), timeout=120)


def test_following_an_agent_of_another_host_replays_and_follows_it_there(
    hosts: tuple[HostProcess, HostProcess],
) -> None:
    a, b = hosts
    stream = _watch(b, agent="on-a", after_sequence=0)
    seen: list[supervisor_pb2.WatchEventsResponse] = []
    stopped = threading.Event()

    def read() -> None:
        for event in stream:
            seen.append(event)
            if event.state == STOPPED:
                stopped.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # a's history of the agent comes first (its deploy up to RUNNING), then what happens.
        a.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name="on-a"), timeout=60)
        assert stopped.wait(60), [(e.sequence, e.state, e.host) for e in seen]
    finally:
        stream.cancel()
        reader.join(10)
    assert any(e.state == RUNNING for e in seen), "the replay of a's history"
    assert {e.host for e in seen} == {"a"}
    assert {e.agent for e in seen} == {"on-a"}
    sequences = [e.sequence for e in seen]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    a.supervisor.StartAgent(supervisor_pb2.StartAgentRequest(name="on-a"), timeout=60)


def test_a_named_host_is_followed_and_local_events_name_this_host(
    hosts: tuple[HostProcess, HostProcess],
) -> None:
    _, b = hosts
    # Every agent of a, asked of b: a's replay, each event naming a.
    there = _watch(b, host="a", after_sequence=0)
    try:
        first = next(iter(there))
    finally:
        there.cancel()
    assert first.host == "a" and first.sequence == 1
    # b's own events name b.
    deploy(b, AGENTS / "worker", name="on-b")
    here = _watch(b, agent="on-b", after_sequence=0)
    try:
        mine = next(iter(here))
    finally:
        here.cancel()
    assert mine.host == "b" and mine.agent == "on-b"


def test_a_host_the_cluster_does_not_know_is_not_found(
    hosts: tuple[HostProcess, HostProcess],
) -> None:
    _, b = hosts
    with pytest.raises(grpc.RpcError) as raised:
        next(iter(_watch(b, host="nowhere")))
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert "nowhere" in (raised.value.details() or "")
    assert "not a live host of the cluster" in (raised.value.details() or "")


def test_an_agent_no_host_runs_is_still_not_found(hosts: tuple[HostProcess, HostProcess]) -> None:
    _, b = hosts
    with pytest.raises(grpc.RpcError) as raised:
        next(iter(_watch(b, agent="no-such-agent")))
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND


def test_without_a_cluster_a_host_name_is_not_found(tmp_path: Path) -> None:
    host = HostProcess(tmp_path / "plain")
    try:
        host.wait_serving()
        with pytest.raises(grpc.RpcError) as raised:
            next(iter(_watch(host, host="a")))
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND
        assert "in no cluster" in (raised.value.details() or "")
        # ... and its own events name no host.
        deploy(host, AGENTS / "worker", name="plain")
        stream = _watch(host, agent="plain", after_sequence=0)
        try:
            assert next(iter(stream)).host == ""
        finally:
            stream.cancel()
    finally:
        host.stop()
