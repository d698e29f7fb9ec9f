"""Claims of docs/cluster.md no other test covered, each as a user of real hosts on a real
redis-server sees it: WatchEvents of a host that dies ends HOST_UNAVAILABLE ("Events across
hosts"); mailbox errors come back through another host as the agent's host gave them ("The
gateway across hosts"); a turn running on a host whose session another host takes ends with
``session_moved`` ("Sessions"); a host judged dead that comes back and finishes has its answer
dropped ("A slow task on a live host is never run twice"); a session change while Redis is away
is UNAVAILABLE, STATE_NOT_WRITTEN ("when Redis goes away"), and a call that needs another host
then is UNAVAILABLE, CLUSTER_UNAVAILABLE.

Hosts a and b serve the module: a runs the gateway agent "chatter" and the toolbox "inbox-a"
(a mailbox of one message). The tests run in order: the late-answer test pauses a, and the
two Redis tests, last, stop the module's Redis."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2, gateway_pb2, supervisor_pb2
from tests.cluster.support import TallyLedger, cluster_host, listed, published
from tests.gateway._support import Conversation, of, open_session
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, details, execute, struct
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture

CLAIM_IDLE = 1.0  # seconds: ETHER_CLUSTER_CLAIM_IDLE of a and b, so b claims soon after dropout


class Hosts(TallyLedger):
    """The module's hosts a and b, and the folder tally shares with the test."""

    def __init__(self, folder: Path, a: HostProcess, b: HostProcess) -> None:
        self.folder = folder
        self.ledger = folder / "ledger"  # where tally leaves a file per run and waits for gates
        self.a, self.b = a, b


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[Hosts]:
    folder = tmp_path_factory.mktemp("claims")
    (folder / "ledger").mkdir()
    env, shared = {"ETHER_CLUSTER_CLAIM_IDLE": str(CLAIM_IDLE)}, (folder / "ledger",)
    a = cluster_host(folder, redis_server.url, "a", env=env, shared=shared)
    try:
        b = cluster_host(folder, redis_server.url, "b", env=env, shared=shared)
        try:
            deploy(a, AGENTS / "chatter")
            deploy(a, AGENTS / "toolbox", name="inbox-a", config=struct({"mailbox_size": 1}))
            published(a, "inbox-a")
            yield Hosts(folder, a, b)
        finally:
            b.stop()
    finally:
        a.stop()


def logged(on: HostProcess, event: str, after: int = 0, /, **fields: object) -> None:
    """Wait for ``on``'s log record starting ``event`` (some go on with an explanation) with
    ``fields``, written after its first ``after`` records."""
    on.wait_for_log(
        lambda r: (
            str(r.get("event")).startswith(event) and all(r.get(k) == v for k, v in fields.items())
        ),
        60,
        after=after,
    )


def takes_tasks(host: HostProcess, agent: str) -> None:
    """Wait until ``host`` reads ``agent``'s task stream (copied from test_failover.py)."""
    host.wait_for_log(
        lambda r: r.get("event") == "cluster takes tasks" and agent in (r.get("agents") or ()),
        60,
    )


def reason(error: grpc.RpcError) -> str:
    return str(details(error)["ErrorInfo"].reason)


def test_watch_events_of_a_host_that_dies_ends_host_unavailable(
    hosts: Hosts, redis_server: RedisServer
) -> None:
    """b follows an agent only "doomed" runs (the call forwarded there); doomed is killed: the
    stream ends UNAVAILABLE, HOST_UNAVAILABLE, naming doomed and its address."""
    doomed = cluster_host(hosts.folder, redis_server.url, "doomed")
    try:
        deploy(doomed, AGENTS / "worker", name="on-doomed")
        published(doomed, "on-doomed")
        request = supervisor_pb2.WatchEventsRequest(agent="on-doomed", after_sequence=0)
        stream = hosts.b.supervisor.WatchEvents(request, timeout=120)
        assert next(stream).host == "doomed"  # the forwarded stream is live
        doomed.process.kill()  # kill -9: its address stops answering
        doomed.process.wait(30)
        with pytest.raises(grpc.RpcError) as ended:
            list(stream)  # the replay, then the end
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
        assert reason(ended.value) == "HOST_UNAVAILABLE"
        assert details(ended.value)["ErrorInfo"].metadata["host"] == "doomed"
        message = ended.value.details() or ""
        assert f"host doomed does not answer at its advertised address {doomed.address}" in message
    finally:
        doomed.stop()


def test_mailbox_errors_through_another_host_are_the_agent_hosts_own(hosts: Hosts) -> None:
    """SendMessage on b to inbox-a (run by a only): a bad type, a message too large and a full
    mailbox come back with the status, reason and message a gives for the same send; a full
    mailbox's RetryInfo stays on a."""
    a, b = hosts.a, hosts.b

    def refused(on: HostProcess, kind: str, text: str = "x") -> grpc.RpcError:
        request = gateway_pb2.SendMessageRequest(agent="inbox-a", type=kind)
        request.data.string_value = text
        with pytest.raises(grpc.RpcError) as raised:
            on.gateway.SendMessage(request, timeout=60)
        return raised.value

    bad_type = ("Not-Snake", "x", grpc.StatusCode.INVALID_ARGUMENT, "INVALID_MESSAGE_TYPE")
    too_large = ("note", "x" * 300_000, grpc.StatusCode.RESOURCE_EXHAUSTED, "MESSAGE_TOO_LARGE")
    for kind, text, code, why in (bad_type, too_large):
        there, here = refused(b, kind, text), refused(a, kind, text)
        assert (there.code(), reason(there)) == (code, why)
        assert there.details() == here.details()
    filled = gateway_pb2.SendMessageRequest(agent="inbox-a", type="note")
    assert b.gateway.SendMessage(filled, timeout=60).mailbox_depth == 1  # its one place taken
    there, here = refused(b, "note"), refused(a, "note")
    assert (there.code(), reason(there)) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "MAILBOX_FULL")
    full = "the mailbox of inbox-a is full (1 messages waiting); retry later"
    assert there.details() == here.details() == full
    assert "RetryInfo" in details(here) and "RetryInfo" not in details(there)


def test_a_turn_running_where_the_session_was_taken_ends_session_moved(hosts: Hosts) -> None:
    """A turn runs on a (chatter "hang": until cancelled) when b takes the session with
    UpdateContext: a's stream shows the turn's error session_moved (retryable) and its
    turn_completed, then ends UNAVAILABLE, reason HOST_STOPPING, naming b."""
    session = open_session(hosts.a, agent="chatter")
    on_a = Conversation(hosts.a, session.id)
    on_a.say("hang")
    turn = on_a.until(lambda e: e.WhichOneof("event") == "accepted")[-1].turn
    update = gateway_pb2.UpdateContextRequest(session_id=session.id, set=struct({"by": "b"}))
    assert hosts.b.gateway.UpdateContext(update, timeout=60).change.version == 2
    with pytest.raises(grpc.RpcError) as moved:
        on_a.rest()
    errors = [(e.turn, e.error) for e in on_a.events if e.WhichOneof("event") == "error"]
    assert [(n, e.error.code, e.error.retryable) for n, e in errors] == [
        (turn, "session_moved", True)
    ]
    assert "the session moved to host b" in errors[0][1].error.message
    assert [t.turn for t in on_a.events if t.WhichOneof("event") == "turn_completed"] == [turn]
    assert of(on_a.events, "reply") == []
    assert moved.value.code() == grpc.StatusCode.UNAVAILABLE
    assert reason(moved.value) == "HOST_STOPPING"
    assert f"session {session.id} moved to host b" in (moved.value.details() or "")


@pytest.mark.parametrize("caller", ["c", "b"])
def test_a_host_judged_dead_that_comes_back_has_its_late_answer_dropped(
    hosts: Hosts, redis_server: RedisServer, caller: str
) -> None:
    """A task a client sent to a (then the only host running the agent); a is paused (SIGSTOP)
    past the dropout: b claims the task and queues it behind two tasks of its own (narrow: two
    slots). a, resumed, finishes its run first: its answer is dropped (logged), and the caller
    gets one answer, the claimer's, once b ran it too. The caller is on a third host c, or on b
    itself: then b claims a task it sent, its own wait for the answer no duplicate of the run
    (it was, until f41648b: the caller got DUPLICATE_TASK_ID)."""
    a, b = hosts.a, hosts.b
    c = cluster_host(hosts.folder, redis_server.url, "c") if caller == "c" else None
    try:
        agent = f"narrow-late-{caller}"  # a name starting "narrow": tally runs two tasks at once
        task_id, gate, busy_gate = f"late-{caller}", f"open-late-{caller}", f"open-busy-{caller}"
        deploy(a, AGENTS / "tally", name=agent)
        published(a, agent)
        takes_tasks(a, agent)
        params = {"folder": str(hosts.ledger), "gate": gate}
        task = agent_input(agent, "mark", params, task_id=task_id)  # mark: idempotent
        on = c if c is not None else b
        late = on.agents.Execute.future(agent_io_pb2.ExecuteRequest(input=task), timeout=180)
        logged(a, "cluster task taken", task_id=task_id)
        # b runs the agent too from now on, its two slots held by its own (local) calls.
        deploy(b, AGENTS / "tally", name=agent)
        takes_tasks(b, agent)
        busy = []
        for n in range(2):
            held = agent_input(agent, "mark", params | {"gate": busy_gate, "n": n})
            call = b.agents.ExecuteStream(
                agent_io_pb2.ExecuteStreamRequest(input=held), timeout=180
            )
            assert next(call).WhichOneof("event") == "started"
            busy.append(call)
        b_seen = len(b.records)
        a.process.send_signal(signal.SIGSTOP)  # a heartbeats no more; its run goes on
        try:
            hosts.open_gate(gate)  # a's run ends; its answer waits for a to resume
            logged(b, "cluster host left", b_seen, host="a")
            logged(b, "cluster task claimed", b_seen, task_id=task_id, host="a", verdict="run")
        finally:
            a.process.send_signal(signal.SIGCONT)
        logged(a, "cluster task answer dropped", task_id=task_id)
        hosts.open_gate(busy_gate)  # b's slots free up: its run of the task goes ahead
        output = late.result().output
        assert (output.status, output.metadata.host) == (agent_io_pb2.TASK_STATUS_SUCCESS, "b")
        assert hosts.ran(task_id) == {a.process.pid: 1, b.process.pid: 1}
        for call in busy:
            assert list(call)[-1].output.status == agent_io_pb2.TASK_STATUS_SUCCESS
        logged(b, "cluster host joined", b_seen, host="a")  # back, for the next test
    finally:
        if c is not None:
            c.stop()


def test_a_session_change_while_redis_is_away_is_state_not_written(
    hosts: Hosts, redis_server: RedisServer
) -> None:
    """Redis stopped under a session a holds: UpdateContext waits, then ends UNAVAILABLE,
    STATE_NOT_WRITTEN; so does a Converse stream about to show that change. (Last: it stops
    the module's Redis.)"""
    a = hosts.a
    session = open_session(a, agent="chatter", context={"n": 1})
    talk = Conversation(a, session.id)
    seen = len(a.records)
    redis_server.stop()
    try:
        logged(a, "cluster degraded: serving this host's agents only", seen)
        update = gateway_pb2.UpdateContextRequest(session_id=session.id, set=struct({"n": 2}))
        with pytest.raises(grpc.RpcError) as unwritten:
            a.gateway.UpdateContext(update, timeout=60)
        assert unwritten.value.code() == grpc.StatusCode.UNAVAILABLE
        assert reason(unwritten.value) == "STATE_NOT_WRITTEN"
        assert "not written to the cluster's Redis" in (unwritten.value.details() or "")
        with pytest.raises(grpc.RpcError) as stream_ended:
            talk.rest()
        assert stream_ended.value.code() == grpc.StatusCode.UNAVAILABLE
        assert reason(stream_ended.value) == "STATE_NOT_WRITTEN"
    finally:
        talk.close()
        redis_server.start()  # the same port, empty
    logged(a, "cluster recovered", seen)


def test_calls_that_need_another_host_while_redis_is_away_are_cluster_unavailable(
    hosts: Hosts, redis_server: RedisServer
) -> None:
    """Redis stopped under c, which trusts what it last read of the directory for a minute: a
    task for inbox-a (run by a only), a message to inbox-a's mailbox (on a), a Publish and a
    read of a session a holds each end UNAVAILABLE, CLUSTER_UNAVAILABLE, with a RetryInfo
    (errors.proto: nothing was sent; retry). (After the other Redis test: it stops Redis too.)"""
    a = hosts.a
    went = [i for i, r in enumerate(a.records) if str(r.get("event")).startswith("cluster degr")]
    if went:  # the test before stopped Redis: it is back
        logged(a, "cluster recovered", went[-1])
    c = cluster_host(hosts.folder, redis_server.url, "c", env={"ETHER_CLUSTER_DROPOUT": "60"})
    try:
        session = open_session(a, agent="chatter")
        assert [h.host for h in listed(c)["inbox-a"].hosts] == ["a"]  # read before it served
        seen = len(c.records)
        redis_server.stop()
        try:
            logged(c, "cluster degraded: serving this host's agents only", seen)
            message = gateway_pb2.SendMessageRequest(agent="inbox-a", type="note")
            calls = {
                "Execute": lambda: execute(c, "inbox-a", "get", {"url": "http://x.test/"}, 60),
                "SendMessage": lambda: c.gateway.SendMessage(message, timeout=60),
                "Publish": lambda: c.gateway.Publish(
                    gateway_pb2.PublishRequest(topic="news", type="note"), timeout=60
                ),
                "GetSession": lambda: c.gateway.GetSession(
                    gateway_pb2.GetSessionRequest(session_id=session.id), timeout=60
                ),
            }
            for name, call in calls.items():
                with pytest.raises(grpc.RpcError) as refused:
                    call()
                said = f"{name}: {refused.value.details()}"
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, said
                assert reason(refused.value) == "CLUSTER_UNAVAILABLE", said
                assert "Redis" in said and "out of reach" in said, said
                assert "RetryInfo" in details(refused.value), said
        finally:
            redis_server.start()  # the same port, empty
        logged(c, "cluster recovered", seen)
    finally:
        c.stop()
