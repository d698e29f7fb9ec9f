"""Edge claims of docs/cluster.md no other test held, each as a user of real hosts on a real
redis-server sees them:

- "When a host dies", a host killed with tasks in flight: an idempotent task of the dead host is
  run again by a live host that runs its agent, and "an ``ExecuteStream`` caller sees a second
  ``started``"; when two live hosts run the agent, they race for it and "only one claimer
  wins" (``XCLAIM`` with the same idle time): the task runs once more, not twice;
- "What the directory holds" and "Tasks across hosts", a host killed with ``kill -9``: once it
  dropped out, an agent only it ran is ``NOT_FOUND`` on ``GetAgent`` and ``Execute`` ("not
  deployed on any host of the cluster"), and an agent it shared lists only its live host in
  ``AgentInfo.hosts``, its tasks answered there;
- "Sessions", when Redis goes away: the changes a host answered ``STATE_NOT_WRITTEN`` "stay
  queued, in order, and go out once Redis answers" (the doc said no test covered it). Redis is
  brought back with what it held (a snapshot saved before it stopped), so what other hosts read
  afterwards is those queued writes, not a session written whole into an empty Redis.

Hosts b, c and d serve the module (b holds the session, d is a caller that runs nothing); the
tests start and kill the hosts that die. The last test stops and restarts the module's Redis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import redis
from google.protobuf import json_format

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.cluster.support import TallyLedger, cluster_host, hosts_of, listed, published
from tests.cluster.test_cluster_doc_claims import logged, reason, takes_tasks
from tests.gateway._support import Conversation, open_session
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, execute, struct
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture

CLAIM_IDLE = 1.0  # seconds: a dead host's tasks are claimed soon after it dropped out
SUCCESS = agent_io_pb2.TASK_STATUS_SUCCESS


def start(folder: Path, redis_url: str, name: str) -> HostProcess:
    """Host ``name``, claiming a dead host's tasks soon after it dropped out."""
    env = {"ETHER_CLUSTER_CLAIM_IDLE": str(CLAIM_IDLE)}
    return cluster_host(folder, redis_url, name, env=env, shared=(folder / "ledger",))


class Hosts(TallyLedger):
    """The module's hosts b, c and d, and the folder tally shares with the test."""

    def __init__(self, folder: Path, redis_url: str, started: dict[str, HostProcess]) -> None:
        self.folder = folder
        self.redis_url = redis_url
        self.ledger = folder / "ledger"  # tally leaves a file per run here and waits for gates
        self.b, self.c, self.d = started["b"], started["c"], started["d"]

    def start(self, name: str) -> HostProcess:
        return start(self.folder, self.redis_url, name)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[Hosts]:
    folder = tmp_path_factory.mktemp("edge")
    (folder / "ledger").mkdir()
    started: dict[str, HostProcess] = {}
    try:
        for name in "bcd":
            started[name] = start(folder, redis_server.url, name)
        yield Hosts(folder, redis_server.url, started)
    finally:
        for host in reversed(started.values()):
            host.stop()


def killed(host: HostProcess) -> None:
    host.process.kill()  # kill -9: no goodbye, its heartbeats stop
    host.process.wait(30)


def claims_of(host: HostProcess, task_id: str) -> list[dict[str, object]]:
    return [
        r
        for r in host.records
        if r.get("event") == "cluster task claimed" and r.get("task_id") == task_id
    ]


def test_two_live_hosts_race_for_a_dead_hosts_idempotent_task_one_runs_it_again(
    hosts: Hosts,
) -> None:
    """An ExecuteStream on d of tally's idempotent ``mark``, taken by "doomed" (then the only
    host running "race"), whose run waits on a gate; b and c then run "race" too, and doomed is
    killed. Exactly one of b and c claims the task (verdict run) and runs it again: the stream
    shows a second ``started`` (the claimer's replica), then the claimer's answer; the task ran
    twice in all, once on doomed and once on the claimer."""
    b, c, d = hosts.b, hosts.c, hosts.d
    doomed = hosts.start("doomed")
    try:
        deploy(doomed, AGENTS / "tally", name="race")
        published(doomed, "race")
        takes_tasks(doomed, "race")
        params = {"folder": str(hosts.ledger), "gate": "open-race"}
        task = agent_input("race", "mark", params, task_id="race-1")
        stream = d.agents.ExecuteStream(agent_io_pb2.ExecuteStreamRequest(input=task), timeout=180)
        first = next(stream)
        assert first.WhichOneof("event") == "started"
        for host in (b, c):
            deploy(host, AGENTS / "tally", name="race")
            takes_tasks(host, "race")
        seen = {h: len(h.records) for h in (b, c)}
        killed(doomed)
        for host in (b, c):
            logged(host, "cluster host left", seen[host], host="doomed")
        hosts.open_gate("open-race")  # doomed is gone: only the claimer's run reads it
        second = next(stream)  # the claimer's run has begun
        assert second.WhichOneof("event") == "started", second
        rest = list(stream)
    finally:
        doomed.stop()
    output = rest[-1].output
    assert output.status == SUCCESS, output.error.message
    claimer = {"b": b, "c": c}[output.metadata.host]
    assert second.started.pid == output.metadata.pid != first.started.pid
    events = [first, second, *rest]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert [e.WhichOneof("event") for e in events].count("started") == 2
    # One claim in all: the claimer's (its log), none by the other live host.
    assert [r["verdict"] for r in claims_of(claimer, "race-1")] == ["run"]
    other = c if claimer is b else b
    assert claims_of(other, "race-1") == []
    assert hosts.ran("race-1") == {doomed.process.pid: 1, claimer.process.pid: 1}


def test_once_a_killed_host_dropped_out_its_agents_are_gone_from_every_view(
    hosts: Hosts,
) -> None:
    """Host "gone" runs "solo" (only it) and "shared" (b runs it too); it is killed. Once d saw
    it leave: ListAgents on d has no "solo" and lists only b for "shared"; GetAgent and Execute
    of "solo" on d are NOT_FOUND, "not deployed on any host of the cluster"; a task for
    "shared" from c is answered by b."""
    b, c, d = hosts.b, hosts.c, hosts.d
    gone = hosts.start("gone")
    try:
        deploy(gone, AGENTS / "worker", name="solo")
        deploy(gone, AGENTS / "worker", name="shared")
        deploy(b, AGENTS / "worker", name="shared")
        for host, agent in ((gone, "solo"), (gone, "shared"), (b, "shared")):
            published(host, agent)
        before = listed(d)
        assert [h.host for h in before["shared"].hosts] == ["b", "gone"]
        assert [h.host for h in before["solo"].hosts] == ["gone"]
        seen = len(d.records)
        killed(gone)
        logged(d, "cluster host left", seen, host="gone")
    finally:
        gone.stop()
    after = listed(d)
    assert "solo" not in after
    assert list(hosts_of(after["shared"])) == ["b"]
    with pytest.raises(grpc.RpcError) as got:
        d.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="solo"), timeout=30)
    with pytest.raises(grpc.RpcError) as ran:
        execute(d, "solo", "echo", {"n": 1}, timeout=30)
    for error in (got.value, ran.value):
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert "not deployed on any host of the cluster" in (error.details() or "")
    output = execute(c, "shared", "echo", {"n": 2}, timeout=60)
    assert (output.status, output.metadata.host) == (SUCCESS, "b")


def context_of(host: HostProcess, session_id: str) -> tuple[dict[str, object], int]:
    request = gateway_pb2.GetContextRequest(session_id=session_id)
    answer = host.gateway.GetContext(request, timeout=30)
    return json_format.MessageToDict(answer.context), answer.version


def test_session_writes_queued_while_redis_is_away_go_out_in_order(
    hosts: Hosts, redis_server: RedisServer
) -> None:
    """b holds a session (context x=0, version 1); Redis's data is saved, then Redis stops.
    Two UpdateContext on b -- x=1 with first=true, then x=2 -- are each answered UNAVAILABLE,
    STATE_NOT_WRITTEN. Redis starts again with the saved data: once b logs its sessions written
    again, GetContext on c reads x=2, first=true at version 3 (both writes, the second last),
    and a Converse on c replays the two changes in their order. (Last: it restarts Redis.)"""
    b, c = hosts.b, hosts.c
    deploy(b, AGENTS / "chatter")
    session = open_session(b, agent="chatter", context={"x": 0})
    assert context_of(c, session.id) == ({"x": 0.0}, 1)
    with redis.Redis.from_url(hosts.redis_url) as client:
        client.save()  # Redis comes back with this, as one with persistence would
    dump = redis_server.folder / "dump.rdb"
    assert dump.exists()
    seen = len(b.records)
    redis_server.stop()
    try:
        logged(b, "cluster degraded: serving this host's agents only", seen)
        for change in ({"x": 1, "first": True}, {"x": 2}):
            update = gateway_pb2.UpdateContextRequest(session_id=session.id, set=struct(change))
            with pytest.raises(grpc.RpcError) as unwritten:
                b.gateway.UpdateContext(update, timeout=60)
            assert unwritten.value.code() == grpc.StatusCode.UNAVAILABLE
            assert reason(unwritten.value) == "STATE_NOT_WRITTEN"
    finally:
        redis_server.start()  # the same port, loading the saved data
        dump.unlink()  # a later restart comes back empty, as the module's others expect
    logged(b, "cluster: sessions written to Redis again", seen)
    assert context_of(c, session.id) == ({"x": 2.0, "first": True}, 3)
    replay = Conversation(c, session.id, after=0)
    try:
        changes = [
            e.context_changed
            for e in replay.until(
                lambda e: (
                    e.WhichOneof("event") == "context_changed" and e.context_changed.version == 3
                )
            )
            if e.WhichOneof("event") == "context_changed"
        ]
    finally:
        replay.close()
    shown = [(ch.version, json_format.MessageToDict(ch.values)) for ch in changes]
    assert shown[-2:] == [(2, {"x": 1.0, "first": True}), (3, {"x": 2.0})]
