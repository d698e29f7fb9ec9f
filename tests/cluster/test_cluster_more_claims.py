"""More claims of docs/cluster.md that no other test held, each as a user of real hosts on a
real redis-server sees them:

- "Settings" (``heartbeat``: "also at once when one of its agents changes state"): a host with a
  heartbeat of minutes publishes a deploy and a stop at once;
- "What the directory holds": an agent only other hosts run is listed with the best state over
  its hosts (not its first host's) and its replicas summed over its hosts;
- "The gateway across hosts", messages: a message goes to the first host by name that has the
  agent RUNNING; a ``request_id`` retried through any host (another, or the agent's own) answers
  the first message;
- "When a host dies", one answer per task id: on the calling host a task id running there is
  refused ("is already running") even with the same params; a caller that joined a task from
  another host and goes away, or whose deadline passes, does not cancel it;
- "Terminals across hosts": ``ListTerminals`` with ``cluster`` keeps its ``state`` filter and
  lists every host's terminals oldest first;
- "When a host dies", what is not guaranteed: a task queued for an agent no live host runs
  waits until a host that runs it joins, and runs there; when Redis restarts empty meanwhile
  (the case the doc says no test covered) it is lost: its caller gets DEADLINE_EXCEEDED and a
  host that runs the agent afterwards never runs it.

Hosts a, b and c serve the module (b runs the agents the others call; c runs "two-inbox" too);
tests start the other hosts they need. The last test stops and restarts the module's Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis

from ether.v1 import agent_io_pb2, supervisor_pb2
from ether.v1 import terminal_pb2 as tpb
from tests.cluster.support import TallyLedger, cluster_host, hosts_of, listed, published
from tests.cluster.test_cluster_doc_claims import logged, reason, takes_tasks
from tests.gateway._support import send
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, budget, data, details, execute
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server
from tests.terminals.support import close, create, shell, wait_exit

__all__ = ["redis_server"]  # the module's Redis fixture

RUNNING = agent_io_pb2.AGENT_STATE_RUNNING
STOPPED = agent_io_pb2.AGENT_STATE_STOPPED
SUCCESS = agent_io_pb2.TASK_STATUS_SUCCESS


class Hosts(TallyLedger):
    """The module's hosts a, b and c, and the folder tally shares with the test."""

    def __init__(self, folder: Path, redis_url: str, started: dict[str, HostProcess]) -> None:
        self.folder = folder
        self.redis_url = redis_url
        self.ledger = folder / "ledger"  # tally leaves a file per run here and waits for gates
        self.a, self.b, self.c = started["a"], started["b"], started["c"]

    def start(self, name: str, env: dict[str, str] | None = None) -> HostProcess:
        return cluster_host(self.folder, self.redis_url, name, env=env, shared=(self.ledger,))


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[Hosts]:
    folder = tmp_path_factory.mktemp("more")
    (folder / "ledger").mkdir()
    started: dict[str, HostProcess] = {}
    shared = (folder / "ledger",)
    try:
        for name in "abc":
            started[name] = cluster_host(folder, redis_server.url, name, shared=shared)
        b, c = started["b"], started["c"]
        deploy(b, AGENTS / "tally", name="tally-b")
        deploy(b, AGENTS / "toolbox", name="inbox-b")
        for host in (b, c):
            deploy(host, AGENTS / "toolbox", name="two-inbox")
        deploy(b, AGENTS / "worker", name="pair", replicas=2)
        deploy(c, AGENTS / "worker", name="pair")
        for host, agent in ((b, "tally-b"), (b, "inbox-b"), (b, "pair"), (c, "pair")):
            published(host, agent)
        takes_tasks(b, "tally-b")
        yield Hosts(folder, redis_server.url, started)
    finally:
        for host in reversed(started.values()):
            host.stop()


def call(on: HostProcess, agent: str, params: dict[str, Any], task_id: str, **fields: Any) -> Any:
    """An Execute of tally's idempotent ``mark`` on ``on``, as a future."""
    task = agent_input(agent, "mark", params, task_id=task_id, **fields)
    return on.agents.Execute.future(agent_io_pb2.ExecuteRequest(input=task), timeout=180)


def wait_queued(redis_url: str, agent: str) -> None:
    """Block (XREAD) until ``agent``'s task stream holds an entry: the task was sent."""
    with redis.Redis.from_url(redis_url) as client:
        found = client.xread({f"ether:tasks:{agent}": "0-0"}, count=1, block=60_000)
    assert found, f"no task reached ether:tasks:{agent}"


HALF_A_HEARTBEAT = 30.0  # seconds: host "slow" would write its entry next a minute after it joined


def test_a_state_change_is_published_at_once_not_at_the_next_heartbeat(hosts: Hosts) -> None:
    """Host "slow" heartbeats once a minute (the most it may): its deploy and its stop of an
    agent are in the directory within half of that (its "cluster published" record), and
    ListAgents on a shows each, because a change of an agent's state is written at once."""
    slow = hosts.start(
        "slow", env={"ETHER_CLUSTER_HEARTBEAT": "60", "ETHER_CLUSTER_DROPOUT": "180"}
    )
    try:
        deploy(slow, AGENTS / "worker", name="on-slow")
        published(slow, "on-slow", timeout=HALF_A_HEARTBEAT)
        (on_slow,) = listed(hosts.a)["on-slow"].hosts
        assert (on_slow.host, on_slow.state) == ("slow", RUNNING)
        slow.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name="on-slow"), timeout=60)
        published(slow, "on-slow", "STOPPED", timeout=HALF_A_HEARTBEAT)
        assert listed(hosts.a)["on-slow"].state == STOPPED
    finally:
        slow.stop()


def test_an_agent_two_other_hosts_run_shows_the_best_state_and_summed_replicas(
    hosts: Hosts,
) -> None:
    """ "pair" runs on b (two replicas) and c (one): ListAgents on a sums its replicas over
    both hosts. Stopped on b, the first of its hosts, a still lists it RUNNING (the best over
    its hosts: c can take a task), b STOPPED in its hosts."""
    pair = listed(hosts.a)["pair"]
    assert [h.host for h in pair.hosts] == ["b", "c"]
    assert (pair.state, pair.replicas, pair.ready_replicas) == (RUNNING, 3, 3)
    assert {n: h.replicas for n, h in hosts_of(pair).items()} == {"b": 2, "c": 1}
    hosts.b.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name="pair"), timeout=60)
    published(hosts.b, "pair", "STOPPED")
    pair = listed(hosts.a)["pair"]
    assert {n: h.state for n, h in hosts_of(pair).items()} == {"b": STOPPED, "c": RUNNING}
    assert pair.state == RUNNING
    got = hosts.a.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="pair"), timeout=30)
    assert got.agent.state == RUNNING


def received(host: HostProcess, agent: str) -> list[dict[str, Any]]:
    """What ``agent`` on ``host`` takes from its mailbox there (msg.receive, no wait)."""
    output = execute(host, agent, "receive", {"wait_ms": 0}, timeout=60)
    assert output.status == SUCCESS, output.error.message
    got: list[dict[str, Any]] = data(output)
    return got


def test_a_message_goes_to_the_first_host_by_name_that_has_the_agent_running(
    hosts: Hosts,
) -> None:
    """ "two-inbox" runs on b and c, each with its own mailbox: SendMessage on a puts the
    message in b's (the first by name). Stopped on b, the next message goes to c, the first
    that has it RUNNING."""
    first = send(hosts.a, "two-inbox", "note", {"n": 1})
    assert [m["id"] for m in received(hosts.b, "two-inbox")] == [first.message.id]
    assert received(hosts.c, "two-inbox") == []
    hosts.b.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name="two-inbox"), timeout=60)
    published(hosts.b, "two-inbox", "STOPPED")
    second = send(hosts.a, "two-inbox", "note", {"n": 2})
    assert [m["id"] for m in received(hosts.c, "two-inbox")] == [second.message.id]


def test_a_request_id_retried_through_any_host_answers_the_first_message(hosts: Hosts) -> None:
    """SendMessage with a request_id on a to "inbox-b" (b runs it), retried through c and on
    b itself: each retry answers the first message (its id, sequence and depth) and puts
    nothing new; b's mailbox holds the one message."""
    first = send(hosts.a, "inbox-b", "note", {"n": 1}, request_id="any-host-1")
    assert first.mailbox_depth == 1
    for retry_on in (hosts.c, hosts.b):
        again = send(retry_on, "inbox-b", "note", {"n": 1}, request_id="any-host-1")
        shown = (again.message.id, again.message.sequence, again.mailbox_depth)
        assert shown == (first.message.id, first.message.sequence, 1)
    assert [m["id"] for m in received(hosts.b, "inbox-b")] == [first.message.id]


def test_a_task_id_running_on_the_calling_host_is_refused_even_with_the_same_params(
    hosts: Hosts,
) -> None:
    """A task on "tally-b" (b runs it) sent from a under an id; while it runs, a second call on
    a under the same id, same agent, action and params, is refused INVALID_ARGUMENT,
    DUPLICATE_TASK_ID, "is already running" (it joins only when sent from another host). The
    first is answered, and ran once."""
    params = {"folder": str(hosts.ledger), "gate": "open-dup"}
    first = call(hosts.a, "tally-b", params, "dup-1")
    logged(hosts.b, "cluster task taken", task_id="dup-1")
    with pytest.raises(grpc.RpcError) as refused:
        call(hosts.a, "tally-b", params, "dup-1").result()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason(refused.value) == "DUPLICATE_TASK_ID"
    assert "task_id 'dup-1' is already running" in (refused.value.details() or "")
    hosts.open_gate("open-dup")
    assert first.result().output.status == SUCCESS
    assert hosts.ran("dup-1") == {hosts.b.process.pid: 1}


def test_a_caller_that_joined_a_task_does_not_cancel_it(hosts: Hosts) -> None:
    """A task on "tally-b" sent from a; two callers on c join it (same id and params): one
    whose deadline (budget.max_time 2 s) passes, and one that goes away (cancelled). Neither
    sends a cancel (the test follows ether:cancels up to a marker it publishes last), and the
    task runs on to its one answer for a's caller, having run once."""
    a, b, c = hosts.a, hosts.b, hosts.c
    params = {"folder": str(hosts.ledger), "gate": "open-join"}
    with redis.Redis.from_url(hosts.redis_url) as client, client.pubsub() as cancels:
        cancels.subscribe("ether:cancels")
        assert cancels.get_message(timeout=30)["type"] == "subscribe"
        first = call(a, "tally-b", params, "join-1")
        logged(b, "cluster task taken", task_id="join-1")
        seen = len(c.records)
        short = agent_io_pb2.TaskContext(budget=budget(max_time=2.0))
        with pytest.raises(grpc.RpcError) as late:
            call(c, "tally-b", params, "join-1", context=short).result()
        assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert reason(late.value) == "TASK_DEADLINE_EXCEEDED"  # a's answer, not the client's
        logged(c, "cluster task joined", seen, task_id="join-1")
        seen = len(c.records)
        gone = call(c, "tally-b", params, "join-1")
        logged(c, "cluster task joined", seen, task_id="join-1")
        gone.cancel()
        # The cancelled call's own log line comes once its handler (and any cancel) is done.
        logged(c, "rpc", seen, method="/ether.v1.AgentIOService/Execute", code="CANCELLED")
        client.publish("ether:cancels", json.dumps({"task_id": "marker", "reason": "test"}))
        sent = []
        while True:
            message = cancels.get_message(timeout=30)
            assert message is not None, "the marker never came back"
            task_id = json.loads(message["data"])["task_id"]
            if task_id == "marker":
                break
            sent.append(task_id)
    assert "join-1" not in sent
    hosts.open_gate("open-join")
    output = first.result().output
    assert (output.status, output.metadata.host) == (SUCCESS, "b")
    assert hosts.ran("join-1") == {b.process.pid: 1}


def test_list_terminals_across_the_cluster_keeps_its_filter_and_age_order(hosts: Hosts) -> None:
    """Terminals made in turn on a (a program that exits), b and a (bash shells): ListTerminals
    on c with cluster=true lists all three oldest first across hosts; with state RUNNING only
    the two shells, with state EXITED only a's exited one."""
    made: list[tuple[HostProcess, tpb.Terminal]] = []
    try:
        exited = create(hosts.a, ["true"])
        made.append((hosts.a, exited))
        wait_exit(hosts.a, exited.id)
        for host in (hosts.b, hosts.a):
            made.append((host, shell(host)))
        ids = [t.id for _, t in made]

        def listing(state: int = 0) -> list[str]:
            request = tpb.ListTerminalsRequest(cluster=True, state=state)  # type: ignore[arg-type]
            answer = hosts.c.terminals.ListTerminals(request, timeout=30)
            assert not answer.unreachable_hosts
            return [t.id for t in answer.terminals]

        assert listing() == ids
        assert listing(tpb.TERMINAL_STATE_RUNNING) == ids[1:]
        assert listing(tpb.TERMINAL_STATE_EXITED) == ids[:1]
    finally:
        for host, terminal in made:
            close(host, terminal.id)


@pytest.fixture(scope="module")
def orphans(hosts: Hosts) -> Iterator[None]:
    """Host "gone" ran tally as "orphan-run" and "orphan-lost", then was killed (kill -9). Its
    entry, with a dropout of 600 s, stays in the directory: the others send tasks for these
    agents to their streams, where no live host reads them."""
    gone = hosts.start("gone", env={"ETHER_CLUSTER_DROPOUT": "600"})
    try:
        for agent in ("orphan-run", "orphan-lost"):
            deploy(gone, AGENTS / "tally", name=agent)
        published(gone, "orphan-run")
        published(gone, "orphan-lost")
        gone.process.kill()
        gone.process.wait(30)
        yield
    finally:
        gone.stop()


def test_a_task_queued_for_an_agent_no_live_host_runs_runs_once_a_host_that_runs_it_joins(
    hosts: Hosts, orphans: None
) -> None:
    """A task sent from a for "orphan-run" waits on its stream (no live host runs the agent);
    host "late" joins running it: it takes the waiting task, and a's caller gets its answer
    from late."""
    params = {"folder": str(hosts.ledger), "gate": ""}
    waiting = call(hosts.a, "orphan-run", params, "orphan-1")
    wait_queued(hosts.redis_url, "orphan-run")
    late = hosts.start("late")
    try:
        deploy(late, AGENTS / "tally", name="orphan-run")
        output = waiting.result().output
        assert (output.status, output.metadata.host) == (SUCCESS, "late")
        assert hosts.ran("orphan-1") == {late.process.pid: 1}
    finally:
        late.stop()


DEADLINE = 40.0  # seconds: the lost task's budget.max_time, its deadline on the calling host


def test_a_queued_task_lost_with_a_redis_restarted_empty_ends_deadline_exceeded(
    hosts: Hosts, orphans: None, redis_server: RedisServer
) -> None:
    """A task sent from a for "orphan-lost" waits on its stream; Redis stops and starts again
    empty. c then runs "orphan-lost" and reads its stream while a's caller still waits: the
    task never runs anywhere, and the caller gets DEADLINE_EXCEEDED from a (its ErrorInfo) at
    the task's deadline. (Last: it restarts the module's Redis.)"""
    a, c = hosts.a, hosts.c
    params = {"folder": str(hosts.ledger), "gate": ""}
    context = agent_io_pb2.TaskContext(budget=budget(max_time=DEADLINE))
    task = agent_input("orphan-lost", "mark", params, task_id="orphan-2", context=context)
    lost = a.agents.Execute.future(agent_io_pb2.ExecuteRequest(input=task), timeout=DEADLINE + 90)
    wait_queued(hosts.redis_url, "orphan-lost")
    seen = {h: len(h.records) for h in (a, c)}
    redis_server.stop()
    try:
        for host in (a, c):
            logged(host, "cluster degraded", seen[host])
    finally:
        redis_server.start()  # the same port, empty
    for host in (a, c):
        logged(host, "cluster recovered", seen[host])
    reading = len(c.records)
    deploy(c, AGENTS / "tally", name="orphan-lost")
    c.wait_for_log(
        lambda r: r.get("event") == "cluster takes tasks" and "orphan-lost" in r["agents"],
        60,
        after=reading,
    )
    assert not lost.done(), "the deadline passed before c read the stream: nothing was shown"
    with pytest.raises(grpc.RpcError) as ended:
        lost.result()
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    info = details(ended.value).get("ErrorInfo")
    assert info is not None, "no ErrorInfo: the call's own gRPC deadline ended it (a hang)"
    assert info.reason == "TASK_DEADLINE_EXCEEDED"
    assert hosts.ran("orphan-2") == {}
