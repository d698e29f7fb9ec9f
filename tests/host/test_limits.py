"""The host's limits on calls themselves (docs/limits.md): streams open at once per caller and
on the host, calls at once, request metadata and message sizes. Over a limit: the status a
client can act on, naming the limit; at it: the call works; and the host goes on serving."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from ether.v1 import terminal_pb2, terminal_pb2_grpc
from tests.support.calls import details
from tests.support.host import HostProcess

KIB = 1024


def _start(tmp_path: Path, config: str) -> HostProcess:
    path = tmp_path / "host.toml"
    path.write_text(config)
    host = HostProcess(tmp_path / "state", "--config", str(path))
    host.wait_serving()
    return host


class Attached:
    """Attach streams to one terminal, each open on the host once ``open`` returns."""

    def __init__(self, channel: grpc.Channel, terminal_id: str) -> None:
        self._stub = terminal_pb2_grpc.TerminalServiceStub(channel)
        self._start = terminal_pb2.AttachRequest(
            start=terminal_pb2.AttachStart(terminal_id=terminal_id)
        )
        self._done = threading.Event()
        self.calls: list[Any] = []

    def _requests(self) -> Iterator[terminal_pb2.AttachRequest]:
        yield self._start
        self._done.wait()

    def open(self) -> Any:
        call = self._stub.Attach(self._requests(), timeout=60)
        first = next(call)  # raises the call's error, if it was refused
        assert first.WhichOneof("kind") == "started"
        self.calls.append(call)
        return call

    def close(self) -> None:
        self._done.set()
        for call in self.calls:
            call.cancel()


def _quota_subject(error: grpc.RpcError) -> str:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    for detail in status.details:
        if detail.Is(error_details_pb2.QuotaFailure.DESCRIPTOR):
            quota = error_details_pb2.QuotaFailure()
            detail.Unpack(quota)
            return quota.violations[0].subject  # type: ignore[no-any-return]
    raise AssertionError("no QuotaFailure in the status")


@pytest.mark.parametrize(
    ("setting", "config", "subject"),
    [
        ("max_streams_per_caller", "max_streams_per_caller = 3\n", "caller:local"),
        ("max_streams", "max_streams = 3\n", "host"),
    ],
)
def test_streams_open_at_once_are_bounded(
    tmp_path: Path, setting: str, config: str, subject: str
) -> None:
    """Three streams open at the limit of three; the fourth is RESOURCE_EXHAUSTED naming the
    setting, with a QuotaFailure (and, host-wide, RetryInfo of 1 s); unary calls still work, and
    a health Watch still opens (probes are not counted); a stream that ends frees its place."""
    host = _start(tmp_path, config)
    try:
        created = host.terminals.CreateTerminal(
            terminal_pb2.CreateTerminalRequest(argv=terminal_pb2.Argv(args=["cat"]), cwd="/tmp"),
            timeout=30,
        ).terminal
        attached = Attached(host.channel, created.id)
        try:
            for _ in range(3):
                attached.open()
            with pytest.raises(grpc.RpcError) as refused:
                attached.open()
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert setting in (refused.value.details() or "")
            info = details(refused.value)["ErrorInfo"]
            assert info.reason == "TOO_MANY_STREAMS" and info.metadata["limit"] == "3"
            assert _quota_subject(refused.value) == subject
            if setting == "max_streams":
                retry = details(refused.value)["RetryInfo"].retry_delay
                assert (retry.seconds, retry.nanos) == (1, 0)
            # A load balancer's health Watch is not a counted stream: it opens and answers.
            probe = health_pb2_grpc.HealthStub(host.channel).Watch(
                health_pb2.HealthCheckRequest(service=""), timeout=30
            )
            assert next(probe).status == health_pb2.HealthCheckResponse.SERVING
            probe.cancel()
            # The host keeps serving other calls.
            listed = host.terminals.ListTerminals(terminal_pb2.ListTerminalsRequest(), timeout=30)
            assert [t.id for t in listed.terminals] == [created.id]
            # A stream that ends gives its place back (cancelled here, as clients leave).
            attached.calls.pop().cancel()
            host.wait_for_log(
                lambda r: (
                    r.get("event") == "rpc"
                    and r.get("method") == "/ether.v1.TerminalService/Attach"
                    and r.get("code") == "CANCELLED"
                )
            )
            attached.open()
        finally:
            attached.close()
    finally:
        host.stop()


def test_calls_at_once_are_bounded_by_max_concurrent_rpcs(tmp_path: Path) -> None:
    """With max_concurrent_rpcs = 4 and four streams open, a fifth call is RESOURCE_EXHAUSTED;
    once a stream ends, calls work again."""
    host = _start(tmp_path, "max_concurrent_rpcs = 4\n")
    try:
        created = host.terminals.CreateTerminal(
            terminal_pb2.CreateTerminalRequest(argv=terminal_pb2.Argv(args=["cat"]), cwd="/tmp"),
            timeout=30,
        ).terminal
        attached = Attached(host.channel, created.id)
        try:
            for _ in range(4):
                attached.open()
            # Another connection: this one may have no more than 4 streams open either, and
            # would queue a fifth call in the client rather than send it.
            with grpc.insecure_channel(host.address) as other:
                stub = terminal_pb2_grpc.TerminalServiceStub(other)
                with pytest.raises(grpc.RpcError) as refused:
                    stub.ListTerminals(terminal_pb2.ListTerminalsRequest(), timeout=30)
                assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                attached.calls.pop().cancel()
                host.wait_for_log(
                    lambda r: (
                        r.get("event") == "rpc"
                        and r.get("method") == "/ether.v1.TerminalService/Attach"
                        and r.get("code") == "CANCELLED"
                    )
                )
                listed = stub.ListTerminals(terminal_pb2.ListTerminalsRequest(), timeout=30)
                assert [t.id for t in listed.terminals] == [created.id]
        finally:
            attached.close()
    finally:
        host.stop()


def test_request_metadata_has_one_limit_of_16_kib(host: HostProcess) -> None:
    """12 KiB of metadata works every time (grpc's defaults refused it at random, past its 8 KiB
    soft limit); past 16 KiB it is RESOURCE_EXHAUSTED every time; the host keeps serving."""
    request = terminal_pb2.ListTerminalsRequest()
    for _ in range(20):
        host.terminals.ListTerminals(request, timeout=30, metadata=[("x-big", "a" * 12 * KIB)])
    for _ in range(5):
        with pytest.raises(grpc.RpcError) as refused:
            host.terminals.ListTerminals(request, timeout=30, metadata=[("x-big", "a" * 17 * KIB)])
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    host.terminals.ListTerminals(request, timeout=30)


def test_a_request_past_64_mib_is_resource_exhausted(host: HostProcess) -> None:
    """A message over MAX_MESSAGE_BYTES is refused before it is decoded; the host keeps serving."""
    huge = terminal_pb2.TerminalInput(data=b"x" * (64 * KIB * KIB + 1))
    with pytest.raises(grpc.RpcError) as refused:
        host.terminals.WriteInput(
            terminal_pb2.WriteInputRequest(terminal_id="t-none", input=huge), timeout=60
        )
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in (refused.value.details() or "")
    host.terminals.ListTerminals(terminal_pb2.ListTerminalsRequest(), timeout=30)
