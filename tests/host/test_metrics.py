"""Prometheus metrics at /metrics on the HTTP listener (docs/telemetry.md, "Metrics"): a real
host with ``[telemetry] metrics`` on, real agents and a real HTTP client; every scrape parsed
with prometheus_client's own parser. Counters are compared before and after the calls a test
makes, so they must move by exactly those calls; no wait is on time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import agent_input, execute
from tests.support.host import HostProcess

METRICS_ON = {"ETHER_TELEMETRY_METRICS": "true"}
EXECUTE = "/ether.v1.AgentIOService/Execute"
# Every label a scrape may carry: agent names, methods, codes, states, replica indexes; never
# an id of a task, session, terminal or run, nor anything a caller sent.
BOUNDED_LABELS = {"method", "code", "agent", "action", "status", "state", "replica", "outcome"}
BOUNDED_LABELS |= {"le"}  # histogram buckets

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: httpx.Client, **headers: str) -> Samples:
    answer = client.get("/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample's value; 0 when the series does not exist (yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


@pytest.fixture
def metrics_host(tmp_path: Path) -> Iterator[HostProcess]:
    host = HostProcess(tmp_path / "state", env=METRICS_ON, http=True)
    try:
        host.wait_serving()
        yield host
    finally:
        assert host.stop() == 0


def test_rpc_and_task_counters_move_by_exactly_the_calls_made(metrics_host: HostProcess) -> None:
    """3 Executes that succeed, 1 whose task fails (status ERROR, the call itself OK) and 1
    refused before any task runs (an action the agent lacks: INVALID_ARGUMENT): the RPC
    counter moves by 4 OK and 1 INVALID_ARGUMENT, the latency histogram's count by 5, the
    task counter by 3 SUCCESS and 1 ERROR, the task histogram's count alike; nothing else
    moves those series, and no label anywhere carries a task id."""
    host = metrics_host
    deploy(host, AGENTS / "worker")
    with httpx.Client(base_url=host.http_address, timeout=30) as client:
        before = scrape(client)
        task_ids = [execute(host, "worker", "echo", {"n": n}).task_id for n in range(3)]
        failed = execute(host, "worker", "broken", {"message": "on purpose"})
        assert agent_io_pb2.TaskStatus.Name(failed.status) == "TASK_STATUS_ERROR"
        task_ids.append(failed.task_id)
        with pytest.raises(grpc.RpcError) as refused:
            execute(host, "worker", "no_such_action")
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        after = scrape(client)

    assert moved(before, after, "ether_rpcs_total", method=EXECUTE, code="OK") == 4
    assert moved(before, after, "ether_rpcs_total", method=EXECUTE, code="INVALID_ARGUMENT") == 1
    assert moved(before, after, "ether_rpc_duration_seconds_count", method=EXECUTE) == 5
    echo = {"agent": "worker", "action": "echo"}
    broken = {"agent": "worker", "action": "broken"}
    assert moved(before, after, "ether_tasks_total", **echo, status="SUCCESS") == 3
    assert moved(before, after, "ether_tasks_total", **broken, status="ERROR") == 1
    assert moved(before, after, "ether_task_duration_seconds_count", **echo) == 3
    assert moved(before, after, "ether_task_duration_seconds_count", **broken) == 1
    # The refused call ran no task: no series for the action it named.
    assert not [key for key in after if ("action", "no_such_action") in key[1]]

    # The agent as it is at the scrape: running, idle, one replica with a live process.
    assert value(after, "ether_agent_state", agent="worker", state="RUNNING") == 1
    assert value(after, "ether_agent_state", agent="worker", state="FATAL") == 0
    assert value(after, "ether_agent_replicas", agent="worker", state="RUNNING") == 1
    assert value(after, "ether_agent_tasks_in_flight", agent="worker") == 0
    assert value(after, "ether_agent_tasks_queued", agent="worker") == 0
    replica = {"agent": "worker", "replica": "0"}
    assert value(after, "ether_replica_resident_memory_bytes", **replica) > 0
    assert value(after, "ether_replica_open_fds", **replica) > 0
    assert ("ether_replica_cpu_seconds_total", frozenset(replica.items())) in after
    assert value(after, "process_resident_memory_bytes") > 0  # the host's own process

    # Bounded cardinality: only known label names, and no task id as any label's value.
    names = {name for _, labels in after for name, _ in labels}
    assert names <= BOUNDED_LABELS, names - BOUNDED_LABELS
    values = {label_value for _, labels in after for _, label_value in labels}
    assert not values & set(task_ids)


def test_restarts_and_fatals_are_counted(metrics_host: HostProcess) -> None:
    """A replica whose process dies under a task with no start retries left goes FATAL: the
    FATAL counter of its agent moves by one and the agent's state reads FATAL."""
    host = metrics_host
    agent = "flaky"
    deploy(host, AGENTS / "lifecycle", name=agent, start_retries=0)
    with httpx.Client(base_url=host.http_address, timeout=30) as client:
        before = scrape(client)
        crash = host.agents.Execute.future(
            agent_io_pb2.ExecuteRequest(input=agent_input(agent, "crash")), timeout=120
        )
        watch_until(host, agent, {"FATAL"})
        with pytest.raises(grpc.RpcError):
            crash.result()
        after = scrape(client)
    assert moved(before, after, "ether_agent_fatals_total", agent=agent) == 1
    # The task it was running ended with the call's error, counted by that code.
    failed = {key: count for key, count in after.items() if key[0] == "ether_tasks_total"}
    assert {dict(labels)["status"] for (_, labels) in failed if ("agent", agent) in labels} == {
        "UNAVAILABLE"
    }
    assert (
        moved(before, after, "ether_tasks_total", agent=agent, action="crash", status="UNAVAILABLE")
        == 1
    )
    assert value(after, "ether_agent_state", agent=agent, state="FATAL") == 1
    assert value(after, "ether_agent_replicas", agent=agent, state="FATAL") == 1
    # Its process is gone: no usage series for it.
    assert value(after, "ether_replica_resident_memory_bytes", agent=agent, replica="0") == 0


def test_metrics_need_a_token_and_the_agent_read_right(tmp_path: Path) -> None:
    """With auth on, /metrics is behind the listener's rules: 401 without a token, 403 for a
    caller without agent.read (naming it), 200 with it."""
    tokens = tmp_path / "tokens"
    tokens.write_text(
        "reader reader-token-for-tests agent.read\nwriter writer-token-for-tests terminal.read\n"
    )
    tokens.chmod(0o600)
    host = HostProcess(
        tmp_path / "state", "--auth-tokens-file", str(tokens), env=METRICS_ON, http=True
    )
    try:
        host.wait_serving()
        with httpx.Client(base_url=host.http_address, timeout=30) as client:
            assert client.get("/metrics").status_code == 401
            denied = client.get(
                "/metrics", headers={"authorization": "Bearer writer-token-for-tests"}
            )
            assert denied.status_code == 403
            assert denied.json()["error"]["metadata"]["right"] == "agent.read"
            samples = scrape(client, authorization="Bearer reader-token-for-tests")
            assert value(samples, "process_resident_memory_bytes") > 0
    finally:
        assert host.stop() == 0


def test_metrics_off_by_default_is_not_found(tmp_path: Path) -> None:
    """Without ``[telemetry] metrics`` the listener serves no /metrics: 404, as any unknown
    path."""
    host = HostProcess(tmp_path / "state", http=True)
    try:
        host.wait_serving()
        with httpx.Client(base_url=host.http_address, timeout=30) as client:
            assert client.get("/healthz").status_code == 200
            assert client.get("/metrics").status_code == 404
    finally:
        assert host.stop() == 0
