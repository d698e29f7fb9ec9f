"""The trace relay (server/ether_host/telemetry/relay.py): a tracing host exports its spans through
a child process of its own, which ends with the host however the host ends, and whose death or
stall costs the host's calls nothing."""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from ether.v1 import agent_io_pb2
from ether_host.telemetry.otlp_wire import SpanWriter
from ether_host.telemetry.relay_child import RowExporter, SerializedTraceStub
from tests.support.agents import AGENTS, deploy
from tests.support.calls import execute
from tests.support.host import HostProcess, sandbox_grants
from tests.support.otlp import OtlpReceiver
from tests.support.procs import wait_gone


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as found:
        yield found


def _traced_host(
    tmp_path: Path, receiver: OtlpReceiver, export_delay: float = 0.05, **options: bool
) -> HostProcess:
    config = tmp_path / "host.toml"
    config.write_text(
        sandbox_grants()
        + f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\nexport_delay = {export_delay}\n'
    )
    host = HostProcess(tmp_path / "state", "--config", str(config), **options)
    host.wait_serving()
    deploy(host, AGENTS / "noisy")
    return host


def _relay_pid(host: HostProcess) -> int:
    pid = int(host.wait_for_log(lambda r: r.get("event") == "trace relay started")["pid"])
    os.kill(pid, 0)  # running
    return pid


def _call_is_exported(host: HostProcess, receiver: OtlpReceiver) -> None:
    output = execute(host, "noisy", "echo", {"n": 1})
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    receiver.wait_for(
        lambda spans: any(s.attributes.get("ether.task_id") == output.task_id for s in spans),
        timeout=15,
    )


def test_a_killed_host_leaves_no_relay_behind(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """kill -9 of a tracing host: its relay reads EOF, exports what it holds and exits within
    a few seconds; nothing is left running."""
    host = _traced_host(tmp_path, receiver)
    relay = _relay_pid(host)
    _call_is_exported(host, receiver)
    host.process.kill()
    host.process.wait()
    survivors = wait_gone([relay], within=10.0)
    assert survivors == [], f"the trace relay {relay} outlived the killed host by 10 s"


def test_ctrl_c_stops_the_host_and_its_relay_after_the_last_spans(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """Ctrl-C where `ether serve` runs in a shell (SIGINT to its process group): the relay runs
    in a session of its own, so it is not interrupted with the host; it exports the last call's
    spans at the host's stop (export_delay far away: they are still in the host) and exits."""
    host = _traced_host(tmp_path, receiver, export_delay=60, own_process_group=True)
    relay = _relay_pid(host)
    output = execute(host, "noisy", "echo", {"last": True})
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    os.killpg(host.process.pid, signal.SIGINT)
    assert host.process.wait(60) == 0
    receiver.wait_for(
        lambda spans: any(s.attributes.get("ether.task_id") == output.task_id for s in spans),
        timeout=15,
    )
    assert wait_gone([relay], within=10.0) == []


def test_a_dead_relay_costs_the_calls_nothing(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """The relay killed under a running host: calls go on succeeding, the host says once that
    spans are dropped from then on, and it still stops cleanly."""
    host = _traced_host(tmp_path, receiver)
    try:
        relay = _relay_pid(host)
        _call_is_exported(host, receiver)
        os.kill(relay, signal.SIGKILL)
        assert wait_gone([relay], within=10.0) == []
        for n in range(5):
            output = execute(host, "noisy", "echo", {"n": n})
            assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
        line = host.wait_for_log(lambda r: r.get("event", "").startswith("the trace relay exited"))
        assert line["level"] == "error"
    finally:
        assert host.stop() == 0
    said = [r for r in host.records if r.get("event", "").startswith("the trace relay exited")]
    assert len(said) == 1, said


def test_a_stuck_relay_does_not_hold_the_hosts_stop(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """A relay that stops reading (SIGSTOP): calls still succeed, and the host's stop kills it
    after a bounded wait instead of waiting for it, then exits 0."""
    host = _traced_host(tmp_path, receiver)
    try:
        relay = _relay_pid(host)
        os.kill(relay, signal.SIGSTOP)
        for n in range(5):
            output = execute(host, "noisy", "echo", {"n": n})
            assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    finally:
        assert host.stop() == 0
    assert any(r.get("event") == "trace relay killed at stop" for r in host.records)
    assert wait_gone([relay], within=10.0) == []


def test_the_relay_exports_again_through_the_channel_it_remakes() -> None:
    """The relay's exporter (relay_child.RowExporter: the SDK's OTLP exporter sending bytes
    made by otlp_wire) to a collector not yet listening: its first try is UNAVAILABLE, it
    remakes its channel and stub (the SDK's reconnection), and its retry, through the remade
    stub, delivers the span once the collector listens."""
    remade = threading.Event()
    made: list[object] = []

    class Watched(RowExporter):
        def _initialize_channel_and_stub(self) -> None:
            super()._initialize_channel_and_stub()
            made.append(self._client)
            if len(made) > 1:  # the first is __init__'s
                remade.set()

    with socket.socket() as probe:  # a free port, where nothing listens yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    writer = SpanWriter()
    exporter = Watched(endpoint=f"127.0.0.1:{port}", insecure=True)
    exporter.resource = writer.resource({"service.name": "relay-test"})
    exporter.scope = writer.scope("ether_host", "0")
    row = ["ab" * 16, 7, 1, "", 0, False, "late", 1, 1, 2, {"k": "v"}, 0, None, None, None]
    outcome: list[object] = []
    sending = threading.Thread(target=lambda: outcome.append(exporter.export([writer.span(row)])))
    sending.start()
    try:
        assert remade.wait(30), "the exporter never remade its channel"
        with OtlpReceiver(port) as collector:
            sending.join(60)
            assert outcome == [SpanExportResult.SUCCESS]
            assert isinstance(made[-1], SerializedTraceStub)
            [span] = collector.wait_for(lambda spans: len(spans) == 1, timeout=10)
            assert (span.name, span.service, span.attributes) == ("late", "relay-test", {"k": "v"})
    finally:
        exporter.shutdown()
        sending.join(60)
