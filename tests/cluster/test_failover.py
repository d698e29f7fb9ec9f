"""Exactly one answer per task, even when a host dies (docs/cluster.md, "When a host dies"):
three real hosts on a real redis-server; host a is killed with SIGKILL while a client on c has
many tasks in flight on a and b, and restarted under its name.

Hosts a and b run "tally" (tests/agents/tally: each execution of a task leaves a file named
after the task and the pid of its host, then waits for a gate file the test creates); a alone
runs "tally-on-a"; a test deploys "narrow" (tally with two slots) on both; c runs no agent and
is where the client calls. The tests run in order:
the kill comes after the tests that need a as it started."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
import redis

from ether.v1 import agent_io_pb2
from tests.cluster.support import TallyLedger, cluster_host, published
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, data, details
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture

SUCCESS = agent_io_pb2.TASK_STATUS_SUCCESS
CLAIM_IDLE = 1.0  # seconds: ETHER_CLUSTER_CLAIM_IDLE of every host here
CALL_TIMEOUT = 180  # each call's deadline: generous, a loaded two-core machine is slow


class Cluster(TallyLedger):
    """The module's hosts; ``a`` is replaced when the test restarts it."""

    def __init__(self, folder: Path, redis_url: str) -> None:
        self.folder = folder
        self.redis_url = redis_url
        self.ledger = folder / "ledger"  # the agents' files, and the gates
        self.ledger.mkdir()
        self.hosts: dict[str, HostProcess] = {}

    def start(self, name: str) -> HostProcess:
        host = cluster_host(
            self.folder,
            self.redis_url,
            name,
            env={"ETHER_CLUSTER_CLAIM_IDLE": str(CLAIM_IDLE)},
            shared=(self.ledger,),
        )
        self.hosts[name] = host
        return host


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer
) -> Iterator[Cluster]:
    hosts = Cluster(tmp_path_factory.mktemp("failover"), redis_server.url)
    try:
        a = hosts.start("a")
        deploy(a, AGENTS / "tally")
        deploy(a, AGENTS / "tally", name="tally-on-a")
        published(a, "tally-on-a")
        b = hosts.start("b")
        deploy(b, AGENTS / "tally")
        published(b, "tally")
        hosts.start("c")
        for host in (a, b):
            takes_tasks(host, "tally")
        yield hosts
    finally:
        for host in hosts.hosts.values():
            host.stop()


def call(
    host: HostProcess,
    agent: str,
    action: str,
    params: dict[str, object],
    task_id: str,
    timeout: float = CALL_TIMEOUT,
) -> grpc.Future:
    request = agent_io_pb2.ExecuteRequest(input=agent_input(agent, action, params, task_id=task_id))
    return host.agents.Execute.future(request, timeout=timeout)


def answer(future: grpc.Future) -> agent_io_pb2.AgentOutput:
    """The output of an Execute started with ``call`` (its error raised)."""
    return future.result().output  # type: ignore[no-any-return]


def taken_by(host: HostProcess, task_ids: set[str]) -> set[str]:
    """The tasks of ``task_ids`` that ``host`` took from their stream, by its log."""
    return {
        str(r["task_id"])
        for r in list(host.records)
        if r.get("event") == "cluster task taken" and r.get("task_id") in task_ids
    }


def taken_by_any(hosts: tuple[HostProcess, ...], task_id: str) -> Callable[[], bool]:
    """A probe: whether one of ``hosts`` has taken ``task_id`` from its stream."""
    return lambda: any(taken_by(host, {task_id}) for host in hosts)


def send_spread(
    cluster: Cluster, params: dict[str, object], prefix: str, most: int
) -> tuple[dict[str, str], dict[str, grpc.Future]]:
    """``tally`` tasks sent through c one at a time, each taken (by a or b) before the next,
    until a holds a ``mark`` and a ``spend`` and b holds one too (at most ``most`` of each
    kind); their kinds and calls by task id.

    Not all at once: a batch sent together can go whole to whichever host's blocked read Redis
    serves first (a consumer group spreads reads, not entries): on fresh clones b took all eight
    of a batch, and a only the marks of sixteen. One at a time, the hosts waiting on the stream
    are served in turn; the kinds go mark, spend, spend, mark, ..., since hosts served strictly
    in turn would otherwise hand a every mark and b every spend."""
    a, b, c = (cluster.hosts[n] for n in "abc")
    kinds: dict[str, str] = {}
    calls: dict[str, grpc.Future] = {}
    for n in range(most):
        for action in ("mark", "spend") if n % 2 == 0 else ("spend", "mark"):
            task_id = f"{prefix}-{action}-{n}"
            kinds[task_id] = action
            calls[task_id] = call(c, "tally", action, params | {"n": len(calls)}, task_id)
            wait_until(f"{task_id} taken", taken_by_any((a, b), task_id))
        sent = set(calls)
        if {kinds[t] for t in taken_by(a, sent)} == {"mark", "spend"} and taken_by(b, sent):
            break
    return kinds, calls


def claimed_by(host: HostProcess) -> list[dict[str, object]]:
    return [r for r in list(host.records) if r.get("event") == "cluster task claimed"]


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 120.0) -> None:
    """Poll ``condition`` (a file or log check) until it holds, within a budget."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.05)


def idle_resets(client: redis.Redis, stream: str, entries: set[str]) -> Callable[[], int]:
    """A probe: the fewest times any of the pending ``entries`` has been seen to get younger
    (its idle time reset by the host that runs it) since the probe was made."""
    last: dict[str, int] = {}
    resets = Counter[str]()

    def probe() -> int:
        for item in client.xpending_range(stream, "ether", "-", "+", 1000):
            entry = item["message_id"].decode()
            idle = int(item["time_since_delivered"])
            if entry in entries and entry in last and idle < last[entry]:
                resets[entry] += 1
            last[entry] = idle
        return min(resets[e] for e in entries)

    return probe


def takes_tasks(host: HostProcess, agent: str) -> None:
    """Wait until ``host`` reads ``agent``'s stream (no task sent earlier skips it)."""
    host.wait_for_log(
        lambda r: r.get("event") == "cluster takes tasks" and agent in (r.get("agents") or ()),
        60,
    )


def readers(client: redis.Redis) -> set[str]:
    """The hosts that have read tasks from tally's stream: its consumers, by host name."""
    consumers = client.xinfo_consumers("ether:tasks:tally", "ether")
    return {c["name"].decode().rpartition("#")[0] for c in consumers}


def test_a_slow_task_on_a_live_host_is_not_claimed(cluster: Cluster) -> None:
    """Tasks that run for many times claim_idle on live hosts keep their entries fresh: none
    is claimed, each runs once and is answered once."""
    a, b, c = (cluster.hosts[n] for n in "abc")
    ids = {f"slow-{n}" for n in range(6)}
    params = {"folder": str(cluster.ledger), "gate": "open-slow"}
    calls = {t: call(c, "tally", "spend", params | {"n": i}, t) for i, t in enumerate(ids)}
    wait_until("every slow task taken", lambda: taken_by(a, ids) | taken_by(b, ids) == ids)
    wait_until("every slow task running", lambda: all(cluster.ran(t) for t in ids))
    # Their entries' idle time is reset again and again: let several claim rounds pass.
    with redis.Redis.from_url(cluster.redis_url) as client:
        entries = {
            item["message_id"].decode()
            for item in client.xpending_range("ether:tasks:tally", "ether", "-", "+", 1000)
        }
        assert len(entries) == len(ids)
        probe = idle_resets(client, "ether:tasks:tally", entries)
        wait_until("each entry kept fresh six times (two claim_idle)", lambda: probe() >= 6)
    assert [claimed_by(h) for h in (a, b, c)] == [[], [], []]
    cluster.open_gate("open-slow")
    pids = {"a": a.process.pid, "b": b.process.pid}
    for task_id, future in calls.items():
        output = answer(future)
        assert output.status == SUCCESS
        assert cluster.ran(task_id) == {pids[output.metadata.host]: 1}


def test_a_task_id_reused_with_other_params_is_refused_and_with_the_same_is_one_task(
    cluster: Cluster,
) -> None:
    a, b, c = (cluster.hosts[n] for n in "abc")
    params = {"folder": str(cluster.ledger), "gate": "open-reuse", "n": 1}
    first = call(c, "tally-on-a", "mark", params, "reuse-1")
    wait_until("reuse-1 taken by a", lambda: taken_by(a, {"reuse-1"}) == {"reuse-1"})
    # From another host: other params, or another action, under the same id are refused.
    for action, other in (("mark", params | {"n": 2}), ("spend", params)):
        with pytest.raises(grpc.RpcError) as refused:
            answer(call(b, "tally-on-a", action, other, "reuse-1", timeout=60))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "task_id 'reuse-1' is taken by another task" in (refused.value.details() or "")
        assert details(refused.value)["ErrorInfo"].reason == "DUPLICATE_TASK_ID"
    # The same params under the same id are the same task: one run, one answer for both.
    again = call(b, "tally-on-a", "mark", params, "reuse-1")
    b.wait_for_log(
        lambda r: r.get("event") == "cluster task joined" and r.get("task_id") == "reuse-1", 60
    )
    cluster.open_gate("open-reuse")
    one, other = answer(first), answer(again)
    assert (one.status, other.status) == (SUCCESS, SUCCESS)
    assert data(one) == data(other)
    assert one.metadata.pid == other.metadata.pid
    assert cluster.ran("reuse-1") == {a.process.pid: 1}
    # Once answered, the id is free again (as on one host): now a new task.
    fresh = answer(call(c, "tally-on-a", "mark", params | {"n": 2}, "reuse-1"))
    assert fresh.status == SUCCESS
    assert sum(cluster.ran("reuse-1").values()) == 2


def test_a_host_with_a_queue_leaves_new_tasks_to_one_with_free_slots(cluster: Cluster) -> None:
    """Least loaded first, where it can be decided: "narrow" runs two tasks at once on a and on
    b; with a's two slots taken and a third task queued there, tasks from c all go to b."""
    a, b, c = (cluster.hosts[n] for n in "abc")
    for host in (a, b):
        deploy(host, AGENTS / "tally", name="narrow")
        published(host, "narrow")
        takes_tasks(host, "narrow")
    params = {"folder": str(cluster.ledger), "gate": "open-narrow"}
    local = {
        f"narrow-local-{n}": call(a, "narrow", "mark", params | {"n": n}, f"narrow-local-{n}")
        for n in range(3)
    }
    a.wait_for_log(
        lambda r: (
            r.get("event") == "cluster leaves tasks to other hosts" and r.get("agent") == "narrow"
        ),
        60,
    )
    ids = {"narrow-remote-0", "narrow-remote-1"}
    remote = {t: call(c, "narrow", "mark", params | {"n": 10 + i}, t) for i, t in enumerate(ids)}
    wait_until("both tasks taken", lambda: taken_by(a, ids) | taken_by(b, ids) == ids)
    assert (taken_by(a, ids), taken_by(b, ids)) == (set(), ids)
    cluster.open_gate("open-narrow")
    for future in local.values():
        assert (answer(future).status, answer(future).metadata.host) == (SUCCESS, "a")
    for future in remote.values():
        assert (answer(future).status, answer(future).metadata.host) == (SUCCESS, "b")


def test_kill_a_under_load_every_task_is_answered_once(cluster: Cluster) -> None:
    """SIGKILL of a while it and b run tasks for c: a's idempotent tasks run again on b, its
    others are answered UNAVAILABLE saying a died; nothing is lost, nothing runs twice on b."""
    a, b, c = (cluster.hosts[n] for n in "abc")
    params = {"folder": str(cluster.ledger), "gate": "open-kill"}
    kinds, calls = send_spread(cluster, params, "kill", 16)
    ids = set(kinds)
    wait_until("every task running", lambda: all(cluster.ran(t) for t in ids))
    on_a = taken_by(a, ids)
    assert {kinds[t] for t in on_a} == {"mark", "spend"}, "a took no task of one kind"
    assert on_a != ids, "b took no task"
    a_pid, b_pid = a.process.pid, b.process.pid
    a.process.kill()
    a.process.wait(30)
    cluster.open_gate("open-kill")

    for task_id, future in calls.items():
        if task_id not in on_a:  # b's own: untouched by a's death
            output = answer(future)
            assert (output.status, output.metadata.host) == (SUCCESS, "b")
            assert cluster.ran(task_id) == {b_pid: 1}
        elif kinds[task_id] == "mark":  # idempotent: run again on b, answered from there
            output = answer(future)
            assert (output.status, output.metadata.host) == (SUCCESS, "b")
            assert cluster.ran(task_id) == {a_pid: 1, b_pid: 1}
        else:  # not idempotent: never run again; the caller learns why
            with pytest.raises(grpc.RpcError) as lost:
                answer(future)
            assert lost.value.code() == grpc.StatusCode.UNAVAILABLE
            message = lost.value.details() or ""
            assert f"host a died or stopped while running task {task_id}" in message
            assert "not idempotent, so it was not run again" in message
            assert details(lost.value)["ErrorInfo"].reason == "AGENT_DIED"
            assert cluster.ran(task_id) == {a_pid: 1}
    # b claimed each of a's tasks once (its log may reach the test after the answers did);
    # nothing else was claimed.
    wait_until("b's claims logged", lambda: len(claimed_by(b)) >= len(on_a), 60)
    claims = Counter(str(r["task_id"]) for r in claimed_by(b))
    assert claims == Counter(on_a)
    assert claimed_by(c) == []


def test_a_restarted_rejoins_steals_nothing_and_takes_tasks_again(cluster: Cluster) -> None:
    """Run after the kill: a, restarted under its name once the directory let it go, claims
    nothing b took over, runs no old task again, and takes new tasks from c."""
    b, c = cluster.hosts["b"], cluster.hosts["c"]
    if cluster.hosts["a"].process.poll() is None:
        pytest.skip("runs after test_kill_a_under_load_every_task_is_answered_once")
    b.wait_for_log(lambda r: r.get("event") == "cluster host left" and r.get("host") == "a", 60)
    before = sorted(p.name for p in cluster.ledger.glob("*.ran"))
    with redis.Redis.from_url(cluster.redis_url) as client:
        # b took over all the dead a held, and took its consumer out of the group.
        assert readers(client) == {"b"}
        a = cluster.start("a")  # its state folder redeploys tally and tally-on-a
        published(a, "tally")
        c.wait_for_log(lambda r: r.get("event") == "cluster host joined" and r.get("host") == "a")
        takes_tasks(a, "tally")
    params = {"folder": str(cluster.ledger), "gate": "open-back"}
    # One at a time, each taken before the next is sent: tasks sent together can go whole to
    # whichever host's read Redis serves first (a consumer group spreads reads, not entries;
    # b took all eight of a batch so once on a fresh clone). One at a time, the hosts waiting
    # on the stream are served in turn, so a takes one of the first few.
    calls: dict[str, grpc.Future] = {}
    for n in range(8):
        task_id = f"back-{n}"
        calls[task_id] = call(c, "tally", "mark", params | {"n": n}, task_id)
        wait_until(f"{task_id} taken", taken_by_any((a, b), task_id))
        if taken_by(a, set(calls)):
            break
    assert taken_by(a, set(calls)), f"the restarted a took none of {len(calls)} tasks"
    cluster.open_gate("open-back")
    pids = {"a": a.process.pid, "b": b.process.pid}
    for task_id, future in calls.items():
        output = answer(future)
        assert output.status == SUCCESS
        assert cluster.ran(task_id) == {pids[output.metadata.host]: 1}
    # No task from before ran again anywhere, and a claimed nothing.
    after = sorted(p.name for p in cluster.ledger.glob("*.ran") if not p.name.startswith("back-"))
    assert after == before
    assert claimed_by(a) == []


def test_a_host_stopped_with_tasks_running_leaves_them_to_the_others(cluster: Cluster) -> None:
    """Run last: SIGTERM of a while it runs tasks for c. A clean stop ends the tasks it runs for
    other hosts at once, without answering them, and leaves the directory: b claims them as from
    a dead host (idempotent ones run again on b, the others are UNAVAILABLE)."""
    a, b = cluster.hosts["a"], cluster.hosts["b"]
    if a.process.poll() is not None:
        pytest.skip("runs after the restart test, with a serving")
    params = {"folder": str(cluster.ledger), "gate": "open-stop"}
    kinds, calls = send_spread(cluster, params, "stop", 8)
    ids = set(kinds)
    wait_until("every task running", lambda: all(cluster.ran(t) for t in ids))
    on_a = taken_by(a, ids)
    assert {kinds[t] for t in on_a} == {"mark", "spend"}, "a took no task of one kind"
    assert a.stop() == 0
    cluster.open_gate("open-stop")
    for task_id, future in calls.items():
        if task_id in on_a and kinds[task_id] == "spend":
            with pytest.raises(grpc.RpcError) as lost:
                answer(future)
            assert lost.value.code() == grpc.StatusCode.UNAVAILABLE
            assert f"host a died or stopped while running task {task_id}" in (
                lost.value.details() or ""
            )
        else:
            output = answer(future)
            assert (output.status, output.metadata.host) == (SUCCESS, "b")
            assert cluster.ran(task_id)[b.process.pid] == 1
