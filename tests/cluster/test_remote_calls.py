"""Every way a task is run reaches an agent only another host runs (docs/cluster.md, "Tasks
across hosts"): Pipe, ExecuteStream, agent.call from an agent, workflow stages and CancelTask,
through the dispatcher of the calling host, over a real redis-server between real hosts.

Host a runs "only-on-a" and "flow-on-a", host b runs "only-on-b" (the test worker and flow
agents); host c runs no agent. All three serve the whole module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.cluster.support import cluster_host, published
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, budget, data, execute
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server
from tests.workflows.runs import run_to_end, state, tasks

__all__ = ["redis_server"]  # the module's Redis fixture

SUCCESS = agent_io_pb2.TASK_STATUS_SUCCESS
ERROR = agent_io_pb2.TASK_STATUS_ERROR


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("remote")


@pytest.fixture(scope="module")
def host_a(folder: Path, redis_server: RedisServer) -> Iterator[HostProcess]:
    host = cluster_host(folder, redis_server.url, "a")
    try:
        deploy(host, AGENTS / "worker", name="only-on-a")
        deploy(host, AGENTS / "flow", name="flow-on-a")
        published(host, "flow-on-a")
        yield host
    finally:
        host.stop()


@pytest.fixture(scope="module")
def host_b(folder: Path, redis_server: RedisServer, host_a: HostProcess) -> Iterator[HostProcess]:
    host = cluster_host(folder, redis_server.url, "b")
    try:
        deploy(host, AGENTS / "worker", name="only-on-b")
        published(host, "only-on-b")
        yield host
    finally:
        host.stop()


@pytest.fixture(scope="module")
def host_c(folder: Path, redis_server: RedisServer, host_b: HostProcess) -> Iterator[HostProcess]:
    host = cluster_host(folder, redis_server.url, "c")
    try:
        yield host
    finally:
        host.stop()


def pids_of(host: HostProcess, agent: str) -> set[int]:
    request = supervisor_pb2.ListProcessesRequest(agent=agent)
    return {p.pid for p in host.supervisor.ListProcesses(request, timeout=30).processes}


def taken(host: HostProcess, task_id: str) -> None:
    """Wait until ``host`` has taken a task another host sent it."""
    host.wait_for_log(
        lambda r: r.get("event") == "cluster task taken" and r.get("task_id") == task_id, 30
    )


def done_code(host: HostProcess, task_id: str) -> str:
    record = host.wait_for_log(
        lambda r: r.get("event") == "cluster task done" and r.get("task_id") == task_id, 30
    )
    return str(record["code"])


def test_pipe_on_b_runs_its_tasks_on_a_and_answers_as_they_finish(
    host_a: HostProcess, host_b: HostProcess
) -> None:
    inputs = [
        agent_input("only-on-a", "nap", {"ms": 600_000}, task_id="pipe-slow"),
        agent_input("only-on-a", "echo", {"n": 1}, task_id="pipe-1"),
        agent_input("only-on-a", "broken", {"message": "only this one"}, task_id="pipe-bad"),
        agent_input("only-on-a", "echo", {"n": 2}, task_id="pipe-2"),
    ]
    requests = iter([agent_io_pb2.PipeRequest(input=i) for i in inputs])
    answers = host_b.agents.Pipe(requests, timeout=120)
    # The first input naps for ten minutes: the other three are answered before it, as they end.
    first = {o.task_id: o for o in (next(answers).output for _ in range(3))}
    assert set(first) == {"pipe-1", "pipe-bad", "pipe-2"}
    assert [data(first[t]) for t in ("pipe-1", "pipe-2")] == [{"n": 1}, {"n": 2}]
    assert all(first[t].status == SUCCESS for t in ("pipe-1", "pipe-2"))
    # The failing input fails alone, with the agent's own error.
    assert (first["pipe-bad"].status, first["pipe-bad"].error.message) == (ERROR, "only this one")
    pids = pids_of(host_a, "only-on-a")
    for output in first.values():
        assert (output.metadata.host, output.metadata.pid in pids) == ("a", True)
    # CancelTask on the calling host ends the nap on a.
    taken(host_a, "pipe-slow")
    host_b.agents.CancelTask(agent_io_pb2.CancelTaskRequest(task_id="pipe-slow"), timeout=30)
    last = next(answers).output
    assert (last.task_id, last.status, last.error.code) == ("pipe-slow", ERROR, "task_cancelled")
    assert list(answers) == []
    assert done_code(host_a, "pipe-slow") == "CANCELLED"


def stream(host: HostProcess, agent: str, task_id: str) -> list[agent_io_pb2.ExecuteStreamResponse]:
    request = agent_io_pb2.ExecuteStreamRequest(
        input=agent_input(agent, "nap", {"ms": 200}, task_id=task_id)
    )
    return list(host.agents.ExecuteStream(request, timeout=60))


def shape(events: list[agent_io_pb2.ExecuteStreamResponse]) -> list[tuple[object, ...]]:
    """What a client reads of each event, less what differs between two runs (times, pids)."""
    out: list[tuple[object, ...]] = []
    for event in events:
        kind = event.WhichOneof("event")
        if kind == "progress":
            out.append((event.sequence, kind, event.progress.progress, event.progress.total))
        elif kind == "log":
            out.append((event.sequence, kind, event.log.message))
        else:
            out.append((event.sequence, kind))
    return out


def test_execute_stream_on_b_brings_a_tasks_events_in_order(
    host_a: HostProcess, host_b: HostProcess
) -> None:
    remote = stream(host_b, "only-on-a", "stream-remote")
    local = stream(host_a, "only-on-a", "stream-local")
    # The same events, in the same order, with the same sequence numbers as on a itself.
    assert shape(remote) == shape(local)
    assert [e.sequence for e in remote] == list(range(1, len(remote) + 1))
    progress = [e.progress.progress for e in remote if e.WhichOneof("event") == "progress"]
    assert progress == list(range(10))
    assert remote[0].started.pid in pids_of(host_a, "only-on-a")
    assert (remote[-1].output.status, remote[-1].output.metadata.host) == (SUCCESS, "a")
    assert all(e.task_id == "stream-remote" for e in remote)


def test_an_agent_on_b_calls_an_agent_on_a(host_a: HostProcess, host_b: HostProcess) -> None:
    output = execute(
        host_b,
        "only-on-b",
        "relay",
        {"agent": "only-on-a", "action": "echo", "params": {"via": "b"}},
        task_id="call-1",
    )
    assert (output.status, output.metadata.host) == (SUCCESS, "b")
    child = data(output)
    assert (child["status"], child["data"]) == ("SUCCESS", {"via": "b"})
    assert child["task_id"].startswith("call-1.")
    assert child["metadata"]["pid"] in pids_of(host_a, "only-on-a")
    # A call back into b from a task b sent to a: b -> a -> b.
    back = execute(
        host_b,
        "only-on-b",
        "relay",
        {
            "agent": "only-on-a",
            "action": "relay",
            "params": {"agent": "only-on-b", "action": "add", "params": {"a": 1, "b": 2}},
        },
    )
    assert data(back)["data"]["data"] == {"sum": 3}


def test_depth_and_budget_hold_across_hosts(host_a: HostProcess, host_b: HostProcess) -> None:
    # Relays alternating between b and a, deeper than the limit of 8: the depth travels too.
    params: dict[str, object] = {"agent": "only-on-a", "action": "echo", "params": {}}
    for level in range(12):
        agent = "only-on-a" if level % 2 else "only-on-b"
        params = {"agent": agent, "action": "relay", "params": params}
    level_output = data(execute(host_b, "only-on-b", "relay", params, timeout=60))
    depth = 1
    while level_output.get("status") == "SUCCESS":
        level_output, depth = level_output["data"], depth + 1
    assert level_output["error"]["code"] == "depth_exceeded"
    assert depth == 8
    # The parent's max_cost bounds a child on the other host, and the child's cost comes back.
    within = execute(
        host_b,
        "only-on-b",
        "relay",
        {"agent": "only-on-a", "action": "costly", "params": {"cost": 0.5}},
        context=agent_io_pb2.TaskContext(budget=budget(max_cost=1.0)),
    )
    assert within.metadata.cost == pytest.approx(0.5)
    over = execute(
        host_b,
        "only-on-b",
        "relay",
        {"agent": "only-on-a", "action": "costly", "params": {"cost": 2.0}},
        context=agent_io_pb2.TaskContext(budget=budget(max_cost=1.0)),
    )
    assert data(over)["error"]["code"] == "budget_exceeded"


ACROSS = """\
name: across-hosts
stages:
  - {name: first, agent: only-on-a, action: add, params: {a: 1, b: 2}}
  - {name: second, agent: only-on-b, action: echo, input_from: first.data}
"""


def test_a_workflow_on_c_runs_its_stages_on_a_and_b(
    host_a: HostProcess, host_b: HostProcess, host_c: HostProcess
) -> None:
    run = run_to_end(host_c, ACROSS)
    assert state(run) == "SUCCEEDED"
    ran = {t.stage: t.output for t in tasks(host_c, run.id)}
    assert {stage: output.metadata.host for stage, output in ran.items()} == {
        "first": "a",
        "second": "b",
    }
    assert data(ran["second"]) == {"input": {"sum": 3}}


RETRIED = """\
name: retried-across-hosts
default_retry: {max_attempts: 3, initial_backoff: 10ms}
stages:
  - {name: flaky, agent: flow-on-a, action: flaky, params: {key: across-hosts, failures: 2}}
"""


def test_a_stage_on_another_host_is_retried_when_its_action_is_idempotent(
    host_a: HostProcess, host_c: HostProcess
) -> None:
    """The retry policy knows the other host's action is idempotent: failing twice, it succeeds
    on its third attempt."""
    run = run_to_end(host_c, RETRIED)
    assert state(run) == "SUCCEEDED", run.error
    (task,) = tasks(host_c, run.id)
    assert (task.attempts, task.output.metadata.host) == (3, "a")
    assert data(task.output) == {"key": "across-hosts", "attempts": 3}


def test_cancel_task_on_the_calling_host_ends_the_task_on_the_other(
    host_a: HostProcess, host_c: HostProcess
) -> None:
    request = agent_io_pb2.ExecuteRequest(
        input=agent_input("only-on-a", "nap", {"ms": 600_000}, task_id="cancel-from-c")
    )
    call = host_c.agents.Execute.future(request, timeout=120)
    taken(host_a, "cancel-from-c")
    host_c.agents.CancelTask(agent_io_pb2.CancelTaskRequest(task_id="cancel-from-c"), timeout=30)
    with pytest.raises(grpc.RpcError) as raised:
        call.result()
    assert raised.value.code() == grpc.StatusCode.CANCELLED
    assert done_code(host_a, "cancel-from-c") == "CANCELLED"
