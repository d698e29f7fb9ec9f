"""A host whose advertised address the others cannot reach (docs/cluster.md, "When an advertised
address is wrong"): tasks still travel over Redis, but health says so on both sides -- the host
that cannot reach a peer names it with the error, and the host that is not reachable says which
hosts could not reach it and which setting to check."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ether.v1 import supervisor_pb2
from tests.cluster.support import cluster_env
from tests.support.host import ETHER, ROOT, HostProcess
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]  # the module's Redis fixture


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


Hosts = tuple[HostProcess, HostProcess, str]  # lost, seen, the address lost advertises


@pytest.fixture(scope="module")
def hosts(tmp_path: Path, redis_server: RedisServer) -> Iterator[Hosts]:
    wrong = f"127.0.0.1:{_closed_port()}"
    env = cluster_env(redis_server.url, "lost") | {"ETHER_CLUSTER_ADVERTISE": wrong}
    lost = HostProcess(tmp_path / "lost", env=env)
    seen = HostProcess(tmp_path / "seen", env=cluster_env(redis_server.url, "seen"))
    try:
        lost.wait_serving()
        seen.wait_serving()
        yield lost, seen, wrong
    finally:
        seen.stop()
        lost.stop()


@pytest.fixture(scope="module")
def tmp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("advertise")


def _unreachable(host: HostProcess, *, containing: str, timeout: float = 60.0) -> list[str]:
    """Wait until GetHostInfo's ``cluster.unreachable`` holds a note containing ``containing``
    (health polled within a budget: the probe runs once a heartbeat)."""
    deadline = time.monotonic() + timeout
    while True:
        info = host.supervisor.GetHostInfo(supervisor_pb2.GetHostInfoRequest(), timeout=10)
        notes = list(info.host.cluster.unreachable)
        if any(containing in n for n in notes):
            return notes
        assert time.monotonic() < deadline, f"no note mentioning {containing!r}: {notes}"
        time.sleep(0.2)


def test_a_peer_that_cannot_be_reached_is_named_with_its_address(
    hosts: Hosts,
) -> None:
    _, seen, advertised = hosts
    notes = _unreachable(seen, containing=f"lost at {advertised}")
    assert any("(from this host)" in n for n in notes), notes
    seen.wait_for_log(
        lambda r: (
            r.get("event") == "cluster host unreachable at its advertised address"
            and r.get("host") == "lost"
        ),
        30,
    )


def test_the_host_others_cannot_reach_says_so_and_names_the_setting(
    hosts: Hosts,
) -> None:
    lost, _, advertised = hosts
    notes = _unreachable(lost, containing="not reachable from seen")
    assert any(advertised in n and "cluster_advertise" in n for n in notes), notes
    # ... and ether status prints it, on the cluster line.
    status = subprocess.run(
        [str(ETHER), "status", "-o", "json", "--address", lost.address],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=True,
    )
    cluster = json.loads(status.stdout)["host"]["cluster"]
    assert any("not reachable from seen" in n for n in cluster["unreachable"]), cluster


def test_hosts_that_reach_each_other_report_nothing(
    hosts: Hosts,
) -> None:
    _, seen, _ = hosts
    # seen reaches itself trivially and "lost" is the only peer it fails: no note about seen.
    info = seen.supervisor.GetHostInfo(supervisor_pb2.GetHostInfoRequest(), timeout=10)
    assert not any("check cluster_advertise" in n for n in info.host.cluster.unreachable)
