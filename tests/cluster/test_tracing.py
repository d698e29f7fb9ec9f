"""A trace crosses hosts (docs/telemetry.md, "Traces"; docs/cluster.md): a call on host b to an
agent only host a runs is one trace. b's task span (``ether.remote``) sits under b's RPC span, and
a's task span, where the agent ran, sits under b's task span: the W3C trace context travels
with the task through Redis. Both hosts export to one real OTLP receiver."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from ether.v1 import agent_io_pb2
from tests.cluster.support import cluster_host, published
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture

TASK = "ether.task noisy.echo"
RPC = "ether.v1.AgentIOService/Execute"


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as found:
        yield found


def _traced(receiver: OtlpReceiver, name: str) -> dict[str, str]:
    return {
        "ETHER_TELEMETRY_OTLP_ENDPOINT": receiver.endpoint,
        "ETHER_TELEMETRY_EXPORT_DELAY": "0.05",
        "ETHER_TELEMETRY_SERVICE_NAME": f"ether-{name}",
    }


@pytest.fixture(scope="module")
def hosts(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer, receiver: OtlpReceiver
) -> Iterator[tuple[HostProcess, HostProcess]]:
    folder: Path = tmp_path_factory.mktemp("cluster-tracing")
    a = cluster_host(folder, redis_server.url, "a", env=_traced(receiver, "a"))
    try:
        deploy(a, AGENTS / "noisy")
        published(a, "noisy")
        b = cluster_host(folder, redis_server.url, "b", env=_traced(receiver, "b"))
        try:
            yield a, b
        finally:
            b.stop()
    finally:
        a.stop()


def _in_trace(trace_id: str) -> object:
    def predicate(spans: list[ReceivedSpan]) -> bool:
        mine = [s for s in spans if s.trace_id == trace_id]
        return sum(s.name == TASK for s in mine) == 2 and any(s.name == RPC for s in mine)

    return predicate


def test_a_call_through_another_host_is_one_trace(
    hosts: tuple[HostProcess, HostProcess], receiver: OtlpReceiver
) -> None:
    _, b = hosts
    trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
    request = agent_io_pb2.ExecuteRequest(
        input=agent_io_pb2.AgentInput(agent="noisy", action="echo")
    )
    metadata = (("traceparent", f"00-{trace_id}-{client_span}-01"),)
    output = b.agents.Execute(request, timeout=60, metadata=metadata).output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    assert output.metadata.host == "a"
    spans = [s for s in receiver.wait_for(_in_trace(trace_id)) if s.trace_id == trace_id]
    rpc = next(s for s in spans if s.name == RPC)
    assert rpc.service == "ether-b" and rpc.parent_span_id == client_span
    tasks = {s.service: s for s in spans if s.name == TASK}
    assert set(tasks) == {"ether-a", "ether-b"}
    calling, running = tasks["ether-b"], tasks["ether-a"]
    assert calling.attributes["ether.remote"] is True
    assert calling.attributes["ether.task_id"] == output.task_id
    assert calling.parent_span_id == rpc.span_id
    # Where the agent ran: under the calling host's task span, with the agent's pid.
    assert running.parent_span_id == calling.span_id
    assert running.attributes["ether.task_id"] == output.task_id
    assert running.attributes["ether.pid"] > 0
    assert "ether.remote" not in running.attributes


def test_an_unsampled_call_stays_unsampled_on_the_other_host(
    hosts: tuple[HostProcess, HostProcess], receiver: OtlpReceiver
) -> None:
    """The caller's decision travels too: a traceparent not sampled (flags 00) records no span
    on either host."""
    _, b = hosts
    trace_id = secrets.token_hex(16)
    request = agent_io_pb2.ExecuteRequest(
        input=agent_io_pb2.AgentInput(agent="noisy", action="echo")
    )
    unsampled = (("traceparent", f"00-{trace_id}-{secrets.token_hex(8)}-00"),)
    task_id = b.agents.Execute(request, timeout=60, metadata=unsampled).output.task_id
    # A sampled call after it, on the same path: once its spans are in, the first call's
    # would be too (each host exports in order).
    marker, client_span = secrets.token_hex(16), secrets.token_hex(8)
    sampled = (("traceparent", f"00-{marker}-{client_span}-01"),)
    b.agents.Execute(request, timeout=60, metadata=sampled)
    spans = receiver.wait_for(_in_trace(marker))
    assert not [s for s in spans if s.trace_id == trace_id]
    # Nor a trace of its own on a: had the decision not travelled, a (sampling every trace it
    # starts) would have recorded the task under a new trace id.
    assert not [s for s in spans if s.attributes.get("ether.task_id") == task_id]
