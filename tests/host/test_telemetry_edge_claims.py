"""Edge claims of docs/telemetry.md and docs/health.md no other test holds, as a user sees them:
real hosts and agents, grpcio and httpx clients, spans from the tests' OTLP receiver (here also
over TLS), scrapes parsed with prometheus_client; every wait is on an answer, an event, an export
or a scrape.

- Traces: `otlp_endpoint = "https://..."` exports over TLS ("http:// plaintext; https://
  TLS"): a collector that serves TLS only, with a throwaway certificate, gets the spans.
- Traces and Metrics: "(or `ETHER_TELEMETRY_OTLP_ENDPOINT=...`, and so on)": each
  `ETHER_TELEMETRY_*` variable wins over its `[telemetry]` key of the config file
  (otlp_endpoint, service_name, sample_ratio, record_payloads, export_delay, metrics).
- Metrics: each family has the type the table gives it; `ether_tasks_total` counts `PARTIAL`;
  a request refused for bad params "is not a task"; `ether_agent_state` is 1 for the agent's
  state and 0 for every other; the host's own `process_*` series.
- Health ("gRPC health"): `ether.agent.NAME` stays SERVING while one of its replicas is down
  and another RUNNING; AgentIO stays SERVING while one agent is stopped and another runs.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import data, execute
from tests.support.certs import Authority
from tests.support.host import HostProcess, sandbox_grants
from tests.support.metrics import METRICS_ON, moved, scrape, value
from tests.support.otlp import OtlpReceiver, ReceivedSpan

# The Metrics table's types, for the families a single host without a cluster writes.
TYPES = {
    "ether_rpcs": "counter",
    "ether_rpc_duration_seconds": "histogram",
    "ether_tasks": "counter",
    "ether_task_duration_seconds": "histogram",
    "ether_agent_tasks_in_flight": "gauge",
    "ether_agent_tasks_queued": "gauge",
    "ether_agent_state": "gauge",
    "ether_agent_replicas": "gauge",
    "ether_agent_restarts": "counter",
    "ether_agent_fatals": "counter",
    "ether_replica_cpu_seconds": "counter",
    "ether_replica_resident_memory_bytes": "gauge",
    "ether_replica_open_fds": "gauge",
    "ether_terminals_open": "gauge",
    "ether_terminal_attached_clients": "gauge",
    "ether_terminal_input_bytes": "counter",
    "ether_terminal_output_bytes": "counter",
    "ether_workflow_runs": "gauge",
    "ether_gateway_sessions": "gauge",
    "ether_gateway_mailbox_messages": "gauge",
    "ether_egress_decisions": "counter",
    "ether_result_cache_lookups": "counter",
}


def _task_spans(receiver: OtlpReceiver, task_id: str) -> list[ReceivedSpan]:
    """The `ether.task` spans of the task ``task_id``, once one was exported."""
    spans = receiver.wait_for(
        lambda got: any(s.attributes.get("ether.task_id") == task_id for s in got)
    )
    return [s for s in spans if s.attributes.get("ether.task_id") == task_id]


def test_an_https_endpoint_exports_to_a_tls_collector(tmp_path: Path) -> None:
    """`otlp_endpoint = "https://..."`: "https:// TLS". The collector serves TLS only, with a
    certificate of a throwaway CA the host's exporter is told to trust (OpenTelemetry's own
    `OTEL_EXPORTER_OTLP_CERTIFICATE`): the task span of a call reaches it."""
    authority = Authority(tmp_path, "collector")
    pair = authority.issue("collector", "otlp collector", server=True)
    with OtlpReceiver(tls=(pair.key.read_bytes(), pair.cert.read_bytes())) as receiver:
        assert receiver.endpoint.startswith("https://127.0.0.1:")
        config = tmp_path / "host.toml"
        config.write_text(
            sandbox_grants()
            + f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\nexport_delay = 0.05\n'
        )
        env = {"OTEL_EXPORTER_OTLP_CERTIFICATE": str(authority.pem)}
        host = HostProcess(tmp_path / "state", "--config", str(config), env=env)
        try:
            host.wait_serving()
            deploy(host, AGENTS / "worker")
            output = execute(host, "worker", "echo", {"over": "tls"})
            [span] = _task_spans(receiver, output.task_id)
            assert span.name == "ether.task worker.echo"
        finally:
            assert host.stop() == 0


def test_environment_variables_override_the_telemetry_table(tmp_path: Path) -> None:
    """ "(or `ETHER_TELEMETRY_OTLP_ENDPOINT=...`, and so on)": the config file sets every
    `[telemetry]` key one way, the environment the other, and the host does what the
    environment says: spans go to the variable's endpoint (the file's has no collector), named
    by its service name, a trace the host starts is kept (the file's ratio keeps none), the
    params are on the task's span (the file says not), they go out within the export budget
    (the file's delay is a minute), and /metrics is served (the file has metrics off)."""
    with OtlpReceiver() as receiver, OtlpReceiver() as elsewhere:
        config = tmp_path / "host.toml"
        config.write_text(
            sandbox_grants()
            + f'[telemetry]\notlp_endpoint = "{elsewhere.endpoint}"\n'
            + 'service_name = "from-the-file"\nsample_ratio = 0.0\nrecord_payloads = false\n'
            + "export_delay = 60\nmetrics = false\n"
        )
        env = {
            "ETHER_TELEMETRY_OTLP_ENDPOINT": receiver.endpoint,
            "ETHER_TELEMETRY_SERVICE_NAME": "from-the-environment",
            "ETHER_TELEMETRY_SAMPLE_RATIO": "1.0",
            "ETHER_TELEMETRY_RECORD_PAYLOADS": "true",
            "ETHER_TELEMETRY_EXPORT_DELAY": "0.05",
            "ETHER_TELEMETRY_METRICS": "true",
        }
        host = HostProcess(tmp_path / "state", "--config", str(config), env=env, http=True)
        try:
            host.wait_serving()
            deploy(host, AGENTS / "worker")
            output = execute(host, "worker", "echo", {"secret_word": "overridden"})
            # The file's export_delay (60 s) would hold the span past wait_for's 30 s.
            [span] = _task_spans(receiver, output.task_id)
            assert span.service == "from-the-environment"
            assert "overridden" in str(span.attributes["ether.params"])
            with httpx.Client(base_url=host.http_address, timeout=30) as client:
                samples = scrape(client)
            tasks = {"agent": "worker", "action": "echo", "status": "SUCCESS"}
            assert value(samples, "ether_tasks_total", **tasks) == 1
        finally:
            assert host.stop() == 0
        assert elsewhere.exports == 0


@pytest.fixture(scope="module")
def metrics_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    host = HostProcess(tmp_path_factory.mktemp("edge-metrics"), env=METRICS_ON, http=True)
    try:
        host.wait_serving()
        deploy(host, AGENTS / "worker")
        deploy(host, AGENTS / "halfway")
        yield host
    finally:
        assert host.stop() == 0


def test_metric_families_have_the_types_the_table_gives(metrics_host: HostProcess) -> None:
    """The Metrics table's Type column: every family it lists for a host outside a cluster is
    written with that type (a counter is summed by `rate()`, a gauge is not, a histogram has
    buckets); and the host's own `process_*` series are there."""
    execute(metrics_host, "worker", "echo", {"n": 1})  # an RPC and a task, so they have series
    with httpx.Client(base_url=metrics_host.http_address, timeout=30) as client:
        answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text
    families = {family.name: family for family in text_string_to_metric_families(answer.text)}
    found = {name: families[name].type for name in TYPES if name in families}
    assert found == TYPES
    for name in ("process_cpu_seconds", "process_resident_memory_bytes", "process_open_fds"):
        assert families[name].samples, name
    assert families["process_open_fds"].samples[0].value > 0


def test_partial_tasks_bad_params_and_the_agent_state(metrics_host: HostProcess) -> None:
    """`ether_tasks_total` counts a task that ended `PARTIAL` under that status; "A request
    refused before any task ran (no such action, bad params) is not a task"; `ether_agent_state`
    is "1 for the agent's state (as ListAgents shows it), 0 for every other state"."""
    host = metrics_host
    with httpx.Client(base_url=host.http_address, timeout=30) as client:
        before = scrape(client)
        half = execute(host, "halfway", "gather", {"topic": "edge-partial", "complete": False})
        assert agent_io_pb2.TaskStatus.Name(half.status) == "TASK_STATUS_PARTIAL", data(half)
        with pytest.raises(grpc.RpcError) as refused:
            execute(host, "worker", "add", {"a": "not a number", "b": 2})
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        after = scrape(client)
    partial = {"agent": "halfway", "action": "gather", "status": "PARTIAL"}
    assert moved(before, after, "ether_tasks_total", **partial) == 1
    add = [key for key in after if key[0] == "ether_tasks_total" and ("action", "add") in key[1]]
    assert add == []  # the refused call ran no task

    listed = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=30).agents
    for agent in listed:
        states = {
            dict(labels)["state"]: count
            for (name, labels), count in after.items()
            if name == "ether_agent_state" and ("agent", agent.name) in labels
        }
        shown = agent_io_pb2.AgentState.Name(agent.state).removeprefix("AGENT_STATE_")
        assert len(states) > 1 and states[shown] == 1, (agent.name, states)
        assert sum(states.values()) == 1, (agent.name, states)


def _check(host: HostProcess, service: str) -> str:
    stub = health_pb2_grpc.HealthStub(host.channel)
    answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=30)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))


def test_health_needs_one_running_replica_and_one_running_agent(tmp_path: Path) -> None:
    """ "`ether.agent.NAME`: SERVING when at least one of agent NAME's replicas is `RUNNING`":
    with one of its two replicas killed and restarting (BACKOFF), it is still SERVING.
    "`ether.v1.AgentIOService`: SERVING when at least one agent has a replica `RUNNING`": with
    one of two agents stopped it is still SERVING; with both stopped, NOT_SERVING."""
    host = HostProcess(tmp_path / "state")
    try:
        host.wait_serving()
        deploy(host, AGENTS / "worker", name="pair", replicas=2)
        deploy(host, AGENTS / "worker", name="single")
        watch_until(host, "pair", {"RUNNING"}, replica=1)  # deploy waits for the first only
        [victim] = [
            process
            for process in host.supervisor.ListProcesses(
                supervisor_pb2.ListProcessesRequest(agent="pair"), timeout=30
            ).processes
            if process.replica == 1
        ]
        os.kill(victim.pid, signal.SIGKILL)  # a replica this test deployed
        down = watch_until(host, "pair", {"BACKOFF"}, replica=victim.replica)
        assert _check(host, "ether.agent.pair") == "SERVING"
        watch_until(host, "pair", {"RUNNING"}, replica=victim.replica, after=down.sequence)

        stop = supervisor_pb2.StopAgentRequest
        host.supervisor.StopAgent(stop(name="single"), timeout=60)
        assert _check(host, "ether.agent.single") == "NOT_SERVING"
        assert _check(host, "ether.v1.AgentIOService") == "SERVING"
        host.supervisor.StopAgent(stop(name="pair"), timeout=60)
        assert _check(host, "ether.v1.AgentIOService") == "NOT_SERVING"
    finally:
        assert host.stop() == 0
