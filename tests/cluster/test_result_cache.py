"""The result cache of a cluster is in Redis (docs/agents.md, "The result cache"): a result made
on host a answers the same task on host b, which runs the agent too, and the entry expires with
the action's cache_ttl as its Redis expiry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ether.v1 import agent_io_pb2
from tests.cluster.support import cluster_host, listed, published
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, execute
from tests.support.host import HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture

SUCCESS = agent_io_pb2.TASK_STATUS_SUCCESS


@pytest.fixture(scope="module")
def hosts(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer
) -> Iterator[tuple[HostProcess, HostProcess]]:
    folder: Path = tmp_path_factory.mktemp("cache")
    a = cluster_host(folder, redis_server.url, "a")
    try:
        b = cluster_host(folder, redis_server.url, "b")
        try:
            deploy(a, AGENTS / "cached")
            deploy(b, AGENTS / "cached")
            published(b, "cached")
            yield a, b
        finally:
            b.stop()
    finally:
        a.stop()


def test_a_result_cached_on_one_host_is_served_on_another(
    hosts: tuple[HostProcess, HostProcess], redis_server: RedisServer
) -> None:
    a, b = hosts
    made = execute(a, "cached", "draw", {"topic": "shared"})
    assert made.status == SUCCESS and not made.metadata.cached
    assert made.metadata.host == "a"

    served = execute(b, "cached", "draw", {"topic": "shared"})
    assert served.metadata.cached
    assert data(served) == data(made)
    assert served.metadata.host == "a"  # where it was made: b's own replica did not run it

    # In Redis with the action's cache_ttl (an hour) as its expiry.
    client = redis.Redis.from_url(redis_server.url)
    try:
        keys = client.keys("ether:cache:cached:draw:1.0.0:*")
        assert len(keys) == 1
        assert 0 < client.pttl(keys[0]) <= 3600 * 1000
    finally:
        client.close()

    refreshed = execute(b, "cached", "draw", {"topic": "shared"}, force_refresh=True)
    assert not refreshed.metadata.cached and refreshed.metadata.host == "b"
    again_on_a = execute(a, "cached", "draw", {"topic": "shared"})
    assert again_on_a.metadata.cached
    assert data(again_on_a) == data(refreshed)


def test_another_host_lists_the_cache_ttl(
    hosts: tuple[HostProcess, HostProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    """A host that does not run the agent shows its actions' cache_ttl from the directory."""
    c = cluster_host(tmp_path, redis_server.url, "c")
    try:
        actions = {a.name: a for a in listed(c)["cached"].actions}
    finally:
        c.stop()
    assert actions["draw"].cache_ttl.seconds == 3600
    assert actions["brief"].cache_ttl.seconds == 1
    assert not actions["plain"].HasField("cache_ttl")


def test_redis_out_of_reach_is_a_miss_and_the_task_runs(
    hosts: tuple[HostProcess, HostProcess], redis_server: RedisServer
) -> None:
    """Last in this module: it stops the module's Redis. The cache then has nothing: the task
    runs on the host's own replica, and the host says once that the cache is out of reach."""
    a, _ = hosts
    redis_server.stop()
    outputs = [execute(a, "cached", "draw", {"topic": "no-redis"}) for _ in range(2)]
    assert all(o.status == SUCCESS and not o.metadata.cached for o in outputs)
    assert data(outputs[0])["nonce"] != data(outputs[1])["nonce"]
    a.wait_for_log(lambda r: r.get("event", "").startswith("result cache: Redis out of reach"))
