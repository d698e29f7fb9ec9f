"""Trace sampling (docs/telemetry.md, ``[telemetry] sample_ratio``): a host that samples none of
the traces it starts records nothing for a call that brings no trace context, yet passes an
unsampled trace context on to its agents; a caller's sampled flag decides for the trace it
continues, whatever the ratio."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, data
from tests.support.host import HostProcess, sandbox_grants
from tests.support.otlp import OtlpReceiver, ReceivedSpan


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as found:
        yield found


@pytest.fixture(scope="module")
def sampling_none(
    tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver
) -> Iterator[HostProcess]:
    """A host tracing to ``receiver`` with ``sample_ratio = 0``."""
    folder: Path = tmp_path_factory.mktemp("sampling-none")
    config = folder / "host.toml"
    config.write_text(
        sandbox_grants()
        + f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\nexport_delay = 0.05\n'
        + "sample_ratio = 0\n"
    )
    host = HostProcess(folder / "state", "--config", str(config))
    try:
        host.wait_serving()
        deploy(host, AGENTS / "traced")
        deploy(host, AGENTS / "noisy")
        yield host
    finally:
        host.stop()


def _say(host: HostProcess, traceparent: str | None) -> agent_io_pb2.AgentOutput:
    """traced.say (it calls noisy.echo and answers the trace context its task frame carried)."""
    text = f"sampling {uuid.uuid4().hex}"
    request = agent_io_pb2.ExecuteRequest(
        input=agent_input("traced", "say", {"text": text, "group": text})
    )
    metadata = (("traceparent", traceparent),) if traceparent else ()
    output: agent_io_pb2.AgentOutput = host.agents.Execute(
        request, timeout=30, metadata=metadata
    ).output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    return output


def _in_trace(spans: list[ReceivedSpan], trace_id: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.trace_id == trace_id]


def test_nothing_sampled_records_nothing_and_passes_an_unsampled_context_on(
    sampling_none: HostProcess, receiver: OtlpReceiver
) -> None:
    """sample_ratio = 0, a call without a traceparent: no span of it reaches the collector, its
    log line names no trace, and the agent's task frame still carries a trace context, marked
    not sampled (flags 00), so an agent's own spans follow the host's decision. Then a call the
    caller samples is recorded whole: its spans come after the first call's would have (spans
    go out in the order they end)."""
    logged = len(sampling_none.records)
    unsampled = _say(sampling_none, None)
    version, trace_id, span_id, flags = data(unsampled)["trace_parent"].split("-")
    assert (version, flags) == ("00", "00")
    assert int(trace_id, 16) and int(span_id, 16)

    sampled_trace, client_span = secrets.token_hex(16), secrets.token_hex(8)
    sampled = _say(sampling_none, f"00-{sampled_trace}-{client_span}-01")
    assert data(sampled)["trace_parent"].startswith(f"00-{sampled_trace}-")
    assert data(sampled)["trace_parent"].endswith("-01")
    spans = receiver.wait_for(
        lambda spans: (
            {"ether.task traced.say", "ether.task noisy.echo", "agent.call"}
            <= {span.name for span in _in_trace(spans, sampled_trace)}
        )
    )
    ours = {span.name: span for span in _in_trace(spans, sampled_trace)}
    rpc = ours["ether.v1.AgentIOService/Execute"]
    assert rpc.parent_span_id == client_span
    assert ours["ether.task traced.say"].parent_span_id == rpc.span_id
    assert ours["ether.task traced.say"].attributes["ether.task_id"] == sampled.task_id
    assert ours["agent.call"].parent_span_id == ours["ether.task traced.say"].span_id
    assert ours["ether.task noisy.echo"].parent_span_id == ours["agent.call"].span_id

    assert _in_trace(spans, trace_id) == []
    assert not [s for s in spans if s.attributes.get("ether.task_id") == unsampled.task_id]
    sampling_none.wait_for_log(
        lambda r: r.get("trace_id") == sampled_trace and r.get("event") == "rpc"
    )
    calls = [
        r
        for r in sampling_none.records[logged:]
        if r.get("event") == "rpc" and r.get("method", "").endswith("/Execute")
    ]
    assert [r.get("trace_id") for r in calls] == [None, sampled_trace]
    assert "span_id" not in calls[0]


def test_a_callers_unsampled_flag_is_followed_and_its_trace_passed_on(
    sampling_none: HostProcess, receiver: OtlpReceiver
) -> None:
    """A traceparent with flags 00: nothing is recorded, and the agent gets the caller's trace
    id, not sampled, so the whole trace stays one across processes."""
    trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
    output = _say(sampling_none, f"00-{trace_id}-{client_span}-00")
    assert data(output)["trace_parent"].startswith(f"00-{trace_id}-")
    assert data(output)["trace_parent"].endswith("-00")
    marker_trace = secrets.token_hex(16)
    _say(sampling_none, f"00-{marker_trace}-{secrets.token_hex(8)}-01")
    spans = receiver.wait_for(
        lambda spans: "ether.task noisy.echo" in {s.name for s in _in_trace(spans, marker_trace)}
    )
    assert _in_trace(spans, trace_id) == []
