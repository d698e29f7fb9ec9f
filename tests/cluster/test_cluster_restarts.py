"""Restarts docs/cluster.md describes, as a user of real hosts on a real redis-server sees them:
a host stopped and restarted under its name keeps the topic messages published while it was
away, each once, and a host joining under a new name starts at the stream's end ("Topics");
a task running on another host whose record a Redis restarted without persistence lost ends
DEADLINE_EXCEEDED for its caller at its deadline, and the hosts go on working ("Tasks across
hosts", what is not guaranteed).

Each test has its own redis-server (the second restarts it) and its own hosts."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
import redis

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.cluster.support import cluster_host, published
from tests.gateway._support import subscribe
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, budget, details, execute
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, started_redis

TOPIC = "news.restarts"
KEPT = "cluster topic message kept"
DEADLINE = 15.0  # seconds: the held task's budget.max_time, its deadline on the calling host


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of the test's own: the task test stops and starts it."""
    yield from started_redis(tmp_path / "redis")


def logged(on: HostProcess, event: str, after: int = 0, /, **fields: object) -> None:
    """Wait for ``on``'s log record starting ``event`` with ``fields``, written after its first
    ``after`` records (copied from test_cluster_doc_claims.py)."""
    on.wait_for_log(
        lambda r: (
            str(r.get("event")).startswith(event) and all(r.get(k) == v for k, v in fields.items())
        ),
        60,
        after=after,
    )


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll ``condition`` (a Redis read) until it holds, within a budget."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.05)


def publish(host: HostProcess, kind: str, n: int) -> str:
    """Publish on TOPIC through ``host``; the message's id."""
    request = gateway_pb2.PublishRequest(topic=TOPIC, type=kind)
    request.data.number_value = n
    return str(host.gateway.Publish(request, timeout=30).message.id)


def copy_of(host: HostProcess, last: str) -> list[tuple[str, int]]:
    """``host``'s copy of TOPIC from its first message through the one with id ``last``: each
    message's id and sequence, as Subscribe with after_sequence 0 replays them."""
    stream = subscribe(host, topic=TOPIC, after=0)
    seen: list[tuple[str, int]] = []
    try:
        for event in stream:
            assert event.WhichOneof("event") == "message", event
            seen.append((event.message.id, event.message.sequence))
            if event.message.id == last:
                return seen
    finally:
        stream.cancel()
    raise AssertionError(f"the stream ended before {last}: {seen}")


def test_a_host_restarted_under_its_name_keeps_what_was_published_while_it_was_away(
    tmp_path: Path, own_redis: RedisServer
) -> None:
    """b is stopped (SIGTERM); three messages are published on a meanwhile; b restarted under
    its name (same state folder) has them in its copy of the topic, each once, in order, after
    the one it had before. A host c joining under a new name has none of the earlier ones: its
    copy starts with the first message published once it serves."""
    hosts: list[HostProcess] = []
    try:
        a = cluster_host(tmp_path, own_redis.url, "a")
        hosts.append(a)
        b = cluster_host(tmp_path, own_redis.url, "b")
        hosts.append(b)
        before = publish(a, "before", 0)
        logged(b, KEPT, message=before)
        with redis.Redis.from_url(own_redis.url) as client:
            # b notes its place after keeping: wait for the note, so its clean stop cannot
            # fall between the two (then it would keep "before" again, as the doc allows).
            entry = client.xrevrange("ether:topics", count=1)[0][0]
            wait_until("b noted its place", lambda: client.get("ether:topics:read:b") == entry)
        assert b.stop() == 0
        away = [publish(a, "while_away", n) for n in range(3)]
        b = cluster_host(tmp_path, own_redis.url, "b")  # same name, same state folder
        hosts.append(b)
        back = publish(a, "after", 3)
        copy = copy_of(b, back)
        assert [i for i, _ in copy] == [before, *away, back]
        sequences = [s for _, s in copy]
        assert sequences == sorted(set(sequences))  # numbering went on across the restart

        c = cluster_host(tmp_path, own_redis.url, "c")  # returns once c serves
        hosts.append(c)
        # c took its place in the stream before it served: the first message published once it
        # serves is in its copy, and nothing from before.
        joined = publish(a, "joined", 4)
        logged(c, KEPT, message=joined)
        assert [i for i, _ in copy_of(c, joined)] == [joined]
    finally:
        for host in reversed(hosts):
            host.stop()


def test_a_task_whose_record_redis_lost_ends_deadline_exceeded_and_the_hosts_go_on(
    tmp_path: Path, own_redis: RedisServer
) -> None:
    """A caller on a runs a task on tally, which only b runs; b's run waits for a gate. Redis
    stops and starts again empty (no persistence) while it runs: the gate opened, b's run ends
    but its answer is dropped (the task's record is gone), and the caller gets DEADLINE_EXCEEDED
    from a at the task's deadline, not a hang. Then a new task from a runs on b."""
    ledger = tmp_path / "ledger"  # where tally leaves a file per run and waits for its gate
    ledger.mkdir()
    a = cluster_host(tmp_path, own_redis.url, "a")
    try:
        b = cluster_host(tmp_path, own_redis.url, "b", shared=(ledger,))
        try:
            deploy(b, AGENTS / "tally")
            published(b, "tally")
            b.wait_for_log(
                lambda r: r.get("event") == "cluster takes tasks" and "tally" in r["agents"], 60
            )
            # The deadline as budget.max_time, the call's own gRPC deadline far later: a
            # DEADLINE_EXCEEDED then comes from a (with its ErrorInfo), not from the client
            # giving up on a call that hangs.
            held = agent_input(
                "tally",
                "spend",
                {"folder": str(ledger), "gate": "open"},
                task_id="lost",
                context=agent_io_pb2.TaskContext(budget=budget(max_time=DEADLINE)),
            )
            request = agent_io_pb2.ExecuteRequest(input=held)
            call = a.agents.Execute.future(request, timeout=DEADLINE + 90)
            logged(b, "cluster task taken", task_id="lost")
            seen = {h: len(h.records) for h in (a, b)}
            own_redis.stop()
            for host in (a, b):  # both saw Redis go: a restart, not a blip between heartbeats
                logged(host, "cluster degraded", seen[host])
            own_redis.start()  # the same port, empty
            for host in (a, b):
                logged(host, "cluster recovered", seen[host])
            (ledger / "open").write_text("open\n")
            logged(b, "cluster task answer dropped", seen[b], task_id="lost")
            with pytest.raises(grpc.RpcError) as lost:
                call.result()
            assert lost.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            info = details(lost.value).get("ErrorInfo")
            assert info is not None, "no ErrorInfo: the call's own gRPC deadline ended it (a hang)"
            assert info.reason == "TASK_DEADLINE_EXCEEDED"
            message = lost.value.details() or ""
            assert "task lost on agent tally (on another host) did not finish" in message
            assert [p.name.split(".")[1] for p in ledger.glob("lost.*.ran")] == [str(b.process.pid)]
            # The hosts go on: b is in the directory again, and a new task from a runs there.
            logged(b, "cluster published", seen[b])
            params = {"folder": str(ledger), "gate": ""}
            output = execute(a, "tally", "spend", params, timeout=60, task_id="after")
            assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
            assert output.metadata.host == "b"
        finally:
            b.stop()
    finally:
        a.stop()
