"""The cluster in /metrics (docs/telemetry.md, "Metrics"): a clustered host with metrics on
shows the live hosts, whether it is degraded, and the Redis bus's backlog of the agents it
runs — tasks sent from another host that it has read and not answered, and tasks no host has
read yet. Real hosts on a real redis-server; every scrape parsed with prometheus_client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from ether.v1 import agent_io_pb2
from tests.cluster.support import cluster_host, published
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, execute
from tests.support.host import HostProcess
from tests.support.metrics import METRICS_ON, moved, scrape, value
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture

NAPS = 3


@pytest.fixture(scope="module")
def hosts(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer
) -> Iterator[tuple[HostProcess, HostProcess]]:
    folder: Path = tmp_path_factory.mktemp("cluster-metrics")
    a = cluster_host(folder, redis_server.url, "a", http=True, env=METRICS_ON)
    try:
        deploy(a, AGENTS / "worker", name="napper")
        published(a, "napper")
        b = cluster_host(folder, redis_server.url, "b", http=True, env=METRICS_ON)
        try:
            a.wait_for_log(
                lambda r: r.get("event") == "cluster host joined" and r.get("host") == "b"
            )
            yield a, b
        finally:
            b.stop()
    finally:
        a.stop()


def test_the_backlog_of_an_agent_follows_the_tasks_sent_to_it(
    hosts: tuple[HostProcess, HostProcess],
) -> None:
    a, b = hosts
    with httpx.Client(base_url=a.http_address, timeout=30) as client:
        before = scrape(client)
        assert value(before, "ether_cluster_hosts") == 2
        assert value(before, "ether_cluster_degraded") == 0

        calls = []
        for index in range(NAPS):
            request = agent_io_pb2.ExecuteRequest(
                input=agent_input("napper", "nap", {"ms": 60_000}, task_id=f"metrics-nap-{index}")
            )
            calls.append(b.agents.Execute.future(request, timeout=120))
        for index in range(NAPS):
            a.wait_for_log(
                lambda r, i=index: (
                    r.get("event") == "cluster task taken"
                    and r.get("task_id") == f"metrics-nap-{i}"
                ),
                60,
            )
        during = scrape(client)
        assert value(during, "ether_cluster_pending_tasks", agent="napper") == NAPS
        # Shown (at 0: a reads its tasks as they come), not merely absent.
        assert ("ether_cluster_unread_tasks", frozenset({("agent", "napper")})) in during
        assert value(during, "ether_cluster_unread_tasks", agent="napper") == 0

        for call in calls:
            call.cancel()
        for index in range(NAPS):
            a.wait_for_log(
                lambda r, i=index: (
                    r.get("event") == "cluster task done" and r.get("task_id") == f"metrics-nap-{i}"
                ),
                60,
            )
        for call in calls:
            with pytest.raises(grpc.FutureCancelledError):
                call.result()
        after = scrape(client)
        # Answered (cancelled): nothing of them is left on the stream.
        assert ("ether_cluster_pending_tasks", frozenset({("agent", "napper")})) in after
        assert value(after, "ether_cluster_pending_tasks", agent="napper") == 0


def test_the_calling_host_counts_the_tasks_it_sent_away(
    hosts: tuple[HostProcess, HostProcess],
) -> None:
    """Tasks sent from b to a's agent: b counts them in ether_remote_tasks_total by status (and
    none in its ether_tasks_total: a ran them, and a counts them there)."""
    a, b = hosts
    with (
        httpx.Client(base_url=a.http_address, timeout=30) as on_a,
        httpx.Client(base_url=b.http_address, timeout=30) as on_b,
    ):
        before_a, before_b = scrape(on_a), scrape(on_b)
        for _ in range(2):
            assert execute(b, "napper", "echo", {"n": 1}).metadata.host == "a"
        failed = execute(b, "napper", "broken", {"message": "on purpose"})
        assert failed.status == agent_io_pb2.TASK_STATUS_ERROR
        after_a, after_b = scrape(on_a), scrape(on_b)
    assert (
        moved(before_b, after_b, "ether_remote_tasks_total", agent="napper", status="SUCCESS") == 2
    )
    assert moved(before_b, after_b, "ether_remote_tasks_total", agent="napper", status="ERROR") == 1
    assert moved(before_b, after_b, "ether_remote_task_duration_seconds_count", agent="napper") == 3
    ran_here = {"agent": "napper", "action": "echo", "status": "SUCCESS"}
    assert moved(before_b, after_b, "ether_tasks_total", **ran_here) == 0
    assert moved(before_a, after_a, "ether_tasks_total", **ran_here) == 2
