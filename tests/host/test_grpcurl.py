"""End to end with the real grpcurl binary against a real `ether serve` on a free port:
reflection lists and describes every service, and every RPC leaves one log line."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess

from ._support import ETHER_SERVICES, HEALTH, REFLECTION, grpcurl, service_descriptors


def test_list_shows_every_service(host: HostProcess) -> None:
    """`grpcurl list` shows the five Ether services, health and reflection."""
    result = grpcurl("-plaintext", host.address, "list")
    assert result.returncode == 0, result.stderr
    listed = set(result.stdout.split())
    assert {*ETHER_SERVICES, HEALTH, REFLECTION} <= listed


@pytest.mark.parametrize("service", ETHER_SERVICES)
def test_describe_shows_every_rpc(host: HostProcess, service: str) -> None:
    """`grpcurl describe` shows each service with the RPCs its descriptor declares."""
    result = grpcurl("-plaintext", host.address, "describe", service)
    assert result.returncode == 0, result.stderr
    assert f"{service} is a service:" in result.stdout
    rpcs = set(re.findall(r"^\s*rpc (\w+) \(", result.stdout, flags=re.MULTILINE))
    assert rpcs, result.stdout
    described = {m.name for m in service_descriptors()[service].methods}
    assert rpcs == described


def test_describe_a_message(host: HostProcess) -> None:
    """Messages resolve through reflection too (what a user does after describing a service)."""
    result = grpcurl("-plaintext", host.address, "describe", "ether.v1.ExecuteRequest")
    assert result.returncode == 0, result.stderr
    assert "ether.v1.ExecuteRequest is a message:" in result.stdout


def _rpc_records(host: HostProcess, method: str) -> list[dict[str, object]]:
    return [r for r in list(host.records) if r.get("event") == "rpc" and r.get("method") == method]


def test_one_log_line_per_rpc(host: HostProcess) -> None:
    """After a call, the host writes one JSON record with event "rpc", method, peer, code,
    duration_ms and an ISO 8601 UTC timestamp — once per call, failed calls included."""
    method = "/ether.v1.AgentIOService/ListAgents"
    before = len(_rpc_records(host, method))
    host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(page_size=7), timeout=10)
    record = host.wait_for_log(lambda r: r.get("event") == "rpc" and r.get("method") == method)
    assert record["code"] == "OK"
    assert record["peer"].startswith("ipv4:127.0.0.1:")
    assert isinstance(record["duration_ms"], int | float) and record["duration_ms"] >= 0
    stamp = str(record["timestamp"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp), stamp
    logged_at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert abs(datetime.now(UTC) - logged_at) < timedelta(minutes=5)  # the clock, in UTC

    failing = "/ether.v1.AgentIOService/GetAgent"
    request = '{"name": "no-such-agent"}'
    result = grpcurl("-plaintext", "-d", request, host.address, failing.strip("/"))
    assert result.returncode != 0
    assert "NotFound" in result.stderr, result.stderr
    failed = host.wait_for_log(lambda r: r.get("event") == "rpc" and r.get("method") == failing)
    assert failed["code"] == "NOT_FOUND"
    assert failed["peer"].startswith("ipv4:127.0.0.1:")
    # The host logs each call when it ends, in order: the grpcurl call's line came after any
    # second line of the ListAgents call would have.
    assert len(_rpc_records(host, method)) == before + 1
    assert len(_rpc_records(host, failing)) == 1


def test_cancelled_streams_are_logged_and_survived(host: HostProcess) -> None:
    """A client that walks away from a stream is logged as CANCELLED (with its peer) and the
    host keeps serving. (Reading the peer of a cancelled call used to crash the host.)"""
    deploy(host, AGENTS / "worker")
    method = "/ether.v1.SupervisorService/WatchEvents"
    for round_ in range(20):
        before = len(_rpc_records(host, method))
        stream = host.supervisor.WatchEvents(supervisor_pb2.WatchEventsRequest(), timeout=30)
        assert next(stream).agent == "worker"  # the servicer is streaming
        stream.cancel()
        host.wait_for_log(lambda r, n=before: len(_rpc_records(host, method)) > n)
        assert host.process.poll() is None, f"host died after cancelled stream {round_}"
    cancelled = _rpc_records(host, method)[-1]
    assert cancelled["code"] == "CANCELLED"
    assert cancelled["peer"].startswith("ipv4:127.0.0.1:")
    host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=10)
