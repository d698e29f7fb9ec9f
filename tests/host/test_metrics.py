"""Prometheus metrics at /metrics on the HTTP listener (docs/telemetry.md, "Metrics"): a real
host with ``[telemetry] metrics`` on, real agents and a real HTTP client; every scrape parsed
with prometheus_client's own parser. Counters are compared before and after the calls a test
makes, so they must move by exactly those calls; no wait is on time."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from ether.v1 import agent_io_pb2, terminal_pb2
from tests.gateway import _support as gateway
from tests.gateway._support import Recorder
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import agent_input, execute, struct
from tests.support.host import HostProcess
from tests.support.metrics import METRICS_ON, moved, scrape, value
from tests.terminals import support as terminals
from tests.workflows import runs as workflow_runs

EXECUTE = "/ether.v1.AgentIOService/Execute"
# Every label a scrape may carry: agent names, methods, codes, states, replica indexes; never
# an id of a task, session, terminal or run, nor anything a caller sent.
BOUNDED_LABELS = {"method", "code", "agent", "action", "status", "state", "replica", "outcome"}
BOUNDED_LABELS |= {"le"}  # histogram buckets


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
    """A replica whose process dies under a task and may start again is restarted: the restart
    counter of its agent moves by one. One with no start retries left goes FATAL: the FATAL
    counter of its agent moves by one and the agent's state reads FATAL."""
    host = metrics_host
    bouncy = deploy(host, AGENTS / "lifecycle", name="bouncy", start_retries=3)
    agent = "flaky"
    deploy(host, AGENTS / "lifecycle", name=agent, start_retries=0)
    with httpx.Client(base_url=host.http_address, timeout=30) as client:
        before = scrape(client)
        with pytest.raises(grpc.RpcError):
            execute(host, bouncy, "crash", timeout=120)
        backoff = watch_until(host, bouncy, {"BACKOFF"})
        watch_until(host, bouncy, {"RUNNING"}, after=backoff.sequence)
        crash = host.agents.Execute.future(
            agent_io_pb2.ExecuteRequest(input=agent_input(agent, "crash")), timeout=120
        )
        watch_until(host, agent, {"FATAL"})
        with pytest.raises(grpc.RpcError):
            crash.result()
        after = scrape(client)
    assert moved(before, after, "ether_agent_restarts_total", agent=bouncy) == 1
    assert moved(before, after, "ether_agent_fatals_total", agent=bouncy) == 0
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


def test_terminal_and_workflow_metrics_follow_what_happened(metrics_host: HostProcess) -> None:
    """A terminal running cat, 6 bytes typed and one client attached: one more terminal open,
    one attached client, input bytes up by exactly 6 and output bytes by exactly the terminal's
    output offset; once it is closed it is no longer open and the byte totals stay. A workflow
    run to its end adds one SUCCEEDED run."""
    host = metrics_host
    deploy(host, AGENTS / "flow")
    with httpx.Client(base_url=host.http_address, timeout=30) as client:
        before = scrape(client)
        terminal = terminals.create(host, ["cat"])
        terminals.write(host, terminal.id, "hello\r")
        terminals.wait_output(host, terminal.id, r"hello\s+hello\s", after=0)
        attach = queue.Queue[terminal_pb2.AttachRequest | None]()
        attach.put(
            terminal_pb2.AttachRequest(start=terminal_pb2.AttachStart(terminal_id=terminal.id))
        )
        stream = host.terminals.Attach(iter(attach.get, None), timeout=120)
        assert next(stream).started.terminal.attached_clients == 1
        output = host.terminals.GetTerminal(
            terminal_pb2.GetTerminalRequest(terminal_id=terminal.id), timeout=30
        ).terminal.output_offset
        during = scrape(client)
        attach.put(None)
        stream.cancel()
        terminals.close(host, terminal.id)
        run = workflow_runs.run_to_end(
            host, "name: once\nstages:\n  - {name: a, agent: flow, action: echo}\n"
        )
        assert workflow_runs.state(run) == "SUCCEEDED"
        after = scrape(client)

    assert moved(before, during, "ether_terminals_open") == 1
    assert value(during, "ether_terminal_attached_clients") == 1
    assert moved(before, during, "ether_terminal_input_bytes_total") == len("hello\r")
    assert moved(before, during, "ether_terminal_output_bytes_total") == output
    assert moved(before, after, "ether_terminals_open") == 0
    assert moved(before, after, "ether_terminal_input_bytes_total") == len("hello\r")
    assert moved(before, after, "ether_terminal_output_bytes_total") == output
    assert moved(before, after, "ether_workflow_runs", state="SUCCEEDED") == 1
    assert value(after, "ether_workflow_runs", state="RUNNING") == 0


def test_gateway_metrics_follow_sessions_mailboxes_and_egress(metrics_host: HostProcess) -> None:
    """One session opened: one more OPEN session. Two messages sent to an agent without a
    message handler: its mailbox holds 2. One fetch the policy denies and one it allows: the
    egress decisions move by exactly one DENIED and one ALLOWED for those agents."""
    host = metrics_host
    chatter = deploy(host, AGENTS / "chatter")
    inbox = deploy(host, AGENTS / "toolbox", name="inbox")
    closed = deploy(host, AGENTS / "toolbox", name="fetch-none")
    loopback = {"allow_hosts": ["127.0.0.1"], "allow_addresses": ["127.0.0.1/32"]}
    opened = deploy(
        host, AGENTS / "toolbox", name="fetch-open", config=struct({"egress": loopback})
    )
    web = Recorder()
    try:
        with httpx.Client(base_url=host.http_address, timeout=30) as client:
            before = scrape(client)
            session = gateway.open_session(host, agent=chatter)
            for n in range(2):
                gateway.send(host, inbox, "job", {"n": n})
            denied = execute(host, closed, "get", {"url": web.url("/hello")})
            allowed = execute(host, opened, "get", {"url": web.url("/hello")})
            after = scrape(client)
    finally:
        web.stop()
    assert agent_io_pb2.TaskStatus.Name(denied.status) == "TASK_STATUS_ERROR"
    assert agent_io_pb2.TaskStatus.Name(allowed.status) == "TASK_STATUS_SUCCESS"
    assert moved(before, after, "ether_gateway_sessions", state="OPEN") == 1
    assert value(after, "ether_gateway_mailbox_messages", agent=inbox) == 2
    egress = "ether_egress_decisions_total"
    assert moved(before, after, egress, agent=closed, outcome="DENIED") == 1
    assert moved(before, after, egress, agent=closed, outcome="ALLOWED") == 0
    assert moved(before, after, egress, agent=opened, outcome="ALLOWED") == 1
    assert moved(before, after, egress, agent=opened, outcome="DENIED") == 0
    assert session.id not in {v for _, labels in after for _, v in labels}


def test_result_cache_lookups_are_counted_by_outcome(metrics_host: HostProcess) -> None:
    """Two calls of a cacheable action with the same params: one miss (it ran), one hit (the
    agent was not asked); a force_refresh call looks nothing up."""
    host = metrics_host
    deploy(host, AGENTS / "cached")
    labels = {"agent": "cached", "action": "draw"}
    with httpx.Client(base_url=host.http_address, timeout=30) as client:
        before = scrape(client)
        first = execute(host, "cached", "draw", {"topic": "metrics", "fail": False})
        second = execute(host, "cached", "draw", {"topic": "metrics", "fail": False})
        execute(host, "cached", "draw", {"topic": "metrics", "fail": False}, force_refresh=True)
        after = scrape(client)
    assert not first.metadata.cached and second.metadata.cached
    assert moved(before, after, "ether_result_cache_lookups_total", outcome="miss", **labels) == 1
    assert moved(before, after, "ether_result_cache_lookups_total", outcome="hit", **labels) == 1
    # A hit is no task the agent ran: the task counter moved by the two that ran.
    assert moved(before, after, "ether_tasks_total", status="SUCCESS", **labels) == 2
