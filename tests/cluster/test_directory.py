"""The cluster directory (docs/cluster.md): hosts on one real redis-server publish their agents
with heartbeats; ListAgents, GetAgent and GetHostInfo on any host show the whole cluster; a
killed host drops out; a host that loses Redis keeps serving its own agents, says it is degraded
(log, GetHostInfo, /readyz) and recovers when Redis returns.

Hosts a and b (b with its HTTP listener) serve the whole module; the Redis-lost test runs last,
as it stops the module's Redis under both."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.cluster.support import (
    cluster_env,
    cluster_host,
    exited_with,
    hosts_of,
    listed,
    published,
)
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, data, execute
from tests.support.host import ETHER, HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="module")
def host_a(folder: Path, redis_server: RedisServer) -> Iterator[HostProcess]:
    host = cluster_host(folder, redis_server.url, "a")
    try:
        deploy(host, AGENTS / "worker")  # "worker" runs on a and b
        deploy(host, AGENTS / "worker", name="only-on-a")
        published(host, "only-on-a")
        yield host
    finally:
        host.stop()


@pytest.fixture(scope="module")
def host_b(folder: Path, redis_server: RedisServer, host_a: HostProcess) -> Iterator[HostProcess]:
    host = cluster_host(folder, redis_server.url, "b", http=True)
    try:
        deploy(host, AGENTS / "worker")
        published(host, "worker")
        yield host
    finally:
        host.stop()


def ether_status(host: HostProcess, *args: str) -> str:
    ran = subprocess.run(
        [str(ETHER), "status", *args, "--address", host.address],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


def host_info(host: HostProcess) -> supervisor_pb2.HostInfo:
    request = supervisor_pb2.GetHostInfoRequest()
    return host.supervisor.GetHostInfo(request, timeout=30).host  # type: ignore[no-any-return]


def test_an_agent_on_one_host_is_listed_by_every_host(
    host_a: HostProcess, host_b: HostProcess
) -> None:
    agents = listed(host_b)
    remote = agents["only-on-a"]
    assert remote.state == agent_io_pb2.AGENT_STATE_RUNNING
    assert [a.name for a in remote.actions if a.name == "echo"] == ["echo"]
    (on_a,) = remote.hosts
    assert (on_a.host, on_a.address, on_a.local) == ("a", host_a.address, False)
    assert on_a.state == agent_io_pb2.AGENT_STATE_RUNNING
    assert (on_a.replicas, on_a.ready_replicas) == (1, 1)

    got = host_b.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="only-on-a"), timeout=30)
    assert [h.host for h in got.agent.hosts] == ["a"]
    # The answering host's own agent: as without a cluster, with every host that runs it.
    on_both = hosts_of(listed(host_a)["worker"])
    assert set(on_both) == {"a", "b"}
    assert on_both["a"].local and not on_both["b"].local
    assert on_both["b"].address == host_b.address
    assert listed(host_a)["worker"].hosts[0].host == "a"  # this host first


def test_an_agent_no_host_runs_is_not_found_across_the_cluster(host_b: HostProcess) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        host_b.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="nowhere"), timeout=30)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert "any host of the cluster" in (raised.value.details() or "")


def test_host_info_names_the_cluster(host_a: HostProcess, host_b: HostProcess) -> None:
    info = host_info(host_a)
    assert info.HasField("cluster")
    cluster = info.cluster
    assert (cluster.host_name, cluster.advertise, cluster.degraded) == ("a", host_a.address, "")
    assert set(cluster.hosts) >= {"a", "b"}
    # `ether status` says the same, and counts an agent only a runs by a's replicas.
    shown = json.loads(ether_status(host_b, "-o", "json"))
    assert shown["host"]["cluster"]["host_name"] == "b"
    assert set(shown["host"]["cluster"]["hosts"]) >= {"a", "b"}
    rows = {row["name"]: row for row in shown["agents"]}
    assert (rows["only-on-a"]["state"], rows["only-on-a"]["running"]) == ("RUNNING", 1)


def test_a_killed_host_drops_out_of_the_directory(
    folder: Path, redis_server: RedisServer, host_b: HostProcess
) -> None:
    doomed = cluster_host(folder, redis_server.url, "c")
    try:
        deploy(doomed, AGENTS / "worker", name="only-on-c")
        published(doomed, "only-on-c")
        assert "only-on-c" in listed(host_b)
        doomed.process.kill()  # kill -9: no goodbye, only its heartbeats stop
        doomed.process.wait(30)
        host_b.wait_for_log(
            lambda r: r.get("event") == "cluster host left" and r.get("host") == "c", 60
        )
        assert "only-on-c" not in listed(host_b)
        assert "c" not in host_info(host_b).cluster.hosts
    finally:
        doomed.stop()


def pids_of(host: HostProcess, agent: str) -> set[int]:
    request = supervisor_pb2.ListProcessesRequest(agent=agent)
    return {p.pid for p in host.supervisor.ListProcesses(request, timeout=30).processes}


def task_done(host: HostProcess, task_id: str) -> dict[str, object]:
    """The log line of a task ``host`` ran for another host, once it ended."""
    return host.wait_for_log(
        lambda r: r.get("event") == "cluster task done" and r.get("task_id") == task_id, 30
    )


def test_execute_on_one_host_runs_on_the_host_that_runs_the_agent(
    host_a: HostProcess, host_b: HostProcess
) -> None:
    output = execute(host_b, "only-on-a", "echo", {"from": "b"}, task_id="remote-echo-1")
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert data(output) == {"from": "b"}
    assert output.metadata.pid in pids_of(host_a, "only-on-a")
    assert output.metadata.host == "a"  # the host's name in the cluster, where it ran
    assert task_done(host_a, "remote-echo-1")["code"] == "SUCCESS"
    # The agent's own errors come back as they are.
    failed = execute(host_b, "only-on-a", "broken", {"message": "no"})
    assert (failed.status, failed.error.message) == (agent_io_pb2.TASK_STATUS_ERROR, "no")
    # A host that runs the agent itself never sends it away: a's worker answers on a.
    assert execute(host_a, "worker", "echo", {}).metadata.pid in pids_of(host_a, "worker")


def test_a_deadline_and_a_cancel_reach_the_other_host(
    host_a: HostProcess, host_b: HostProcess
) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        execute(host_b, "only-on-a", "nap", {"ms": 60_000}, timeout=2, task_id="remote-late-1")
    assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert task_done(host_a, "remote-late-1")["code"] in ("DEADLINE_EXCEEDED", "CANCELLED")

    request = agent_io_pb2.ExecuteRequest(
        input=agent_input("only-on-a", "nap", {"ms": 60_000}, task_id="remote-cancel-1")
    )
    call = host_b.agents.Execute.future(request, timeout=120)
    host_a.wait_for_log(
        lambda r: r.get("event") == "cluster task taken" and r.get("task_id") == "remote-cancel-1"
    )
    call.cancel()
    # Ended by the cancel, long before its 60-second nap or its 120-second deadline.
    assert task_done(host_a, "remote-cancel-1")["code"] == "CANCELLED"


def test_a_host_that_stops_cleanly_leaves_the_directory_at_once(
    folder: Path, redis_server: RedisServer, host_b: HostProcess
) -> None:
    passing = cluster_host(folder, redis_server.url, "d")
    deploy(passing, AGENTS / "worker", name="only-on-d")
    published(passing, "only-on-d")
    assert "only-on-d" in listed(host_b)
    assert passing.stop() == 0
    # Its entry is deleted on the way out, not left to expire after dropout.
    assert "only-on-d" not in listed(host_b)
    assert "d" not in host_info(host_b).cluster.hosts


def test_a_second_host_with_a_taken_name_refuses_to_start(
    folder: Path, redis_server: RedisServer, host_a: HostProcess
) -> None:
    twin = HostProcess(folder / "twin", env=cluster_env(redis_server.url, "a"))
    code, said = exited_with(twin)
    assert code == 1, said
    assert f"host_name 'a' is taken by a live host at {host_a.address}" in said
    assert host_info(host_a).cluster.host_name == "a"  # the first one goes on


def test_a_host_whose_redis_is_out_of_reach_does_not_start(folder: Path) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    lonely = HostProcess(folder / "lonely", env=cluster_env(url, "lonely"))
    code, said = exited_with(lonely)
    assert code == 1, said
    assert f"cannot reach Redis at {url} (cluster_redis_url)" in said


def test_a_host_that_loses_redis_serves_its_agents_degraded_and_recovers(
    redis_server: RedisServer, host_a: HostProcess, host_b: HostProcess
) -> None:
    # Only what the hosts log from now on: a loaded machine may have made them miss a heartbeat
    # (degraded, then recovered) earlier in the module.
    marks = {host: len(host.records) for host in (host_a, host_b)}
    redis_server.stop()
    try:
        # Degraded once a heartbeat fails (as a blip earlier may have left it: Redis is away
        # now, so it stays degraded until it returns).
        deadline = time.monotonic() + 60
        while redis_server.url not in host_info(host_b).cluster.degraded:
            assert time.monotonic() < deadline, "b never said it was degraded"
            time.sleep(0.1)
        assert any(r.get("event", "").startswith("cluster degraded") for r in host_b.records), (
            "the degraded log line"
        )
        assert data(execute(host_b, "worker", "echo", {"still": "here"})) == {"still": "here"}
        degraded = host_info(host_b).cluster.degraded
        assert redis_server.url in degraded, degraded
        with httpx.Client(base_url=host_b.http_address, timeout=30) as client:
            ready = client.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["degraded"] == degraded
        assert "DEGRADED, serving its own agents only" in ether_status(host_b)
        # Cut off, b lists its own agents and none it cannot vouch for.
        assert "worker" in listed(host_b)
    finally:
        redis_server.start()  # the same port, empty: nothing was saved
    for host in (host_a, host_b):
        host.wait_for_log(lambda r: r.get("event") == "cluster recovered", 60, after=marks[host])
    assert host_info(host_b).cluster.degraded == ""
    with httpx.Client(base_url=host_b.http_address, timeout=30) as client:
        assert "degraded" not in client.get("/readyz").json()
    # a wrote its entry again into the empty Redis: b lists a's agents again.
    assert [h.host for h in listed(host_b)["only-on-a"].hosts] == ["a"]
    # ... and b's calls reach a again, through a Redis that has none of the streams, groups
    # and scripts of before (the scripts are loaded again at their first call).
    for number in range(3):
        output = execute(host_b, "only-on-a", "echo", {"after": number})
        assert (output.metadata.host, data(output)) == ("a", {"after": number})
