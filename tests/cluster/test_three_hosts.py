"""The README's three commands (between its cluster:start and cluster:end markers, the same in
docs/cluster.md) start three
hosts on one Redis: run as written, with only the Redis port, the listen ports and the state
folders changed to the test's own (a real redis-server on a free port, ports the kernel gives)."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import supervisor_pb2, supervisor_pb2_grpc
from tests.support.host import ROOT
from tests.support.redis import RedisServer, redis_server

__all__ = ["redis_server"]

README = ROOT / "README.md"
DOC = ROOT / "docs" / "cluster.md"


def block_of(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    block = text.split("<!-- cluster:start -->", 1)[1].split("<!-- cluster:end -->", 1)[0]
    return [line for line in block.splitlines() if line and not line.startswith("```")]


def commands() -> list[str]:
    """The README's three commands; docs/cluster.md shows the same three."""
    lines = block_of(README)
    assert len(lines) == 3, lines
    assert block_of(DOC) == lines, "README.md and docs/cluster.md show different commands"
    return lines


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serving(process: subprocess.Popen[str]) -> dict[str, object]:
    """The host's "serving" log line (its JSON log on stderr, not a terminal)."""
    assert process.stderr is not None
    for line in process.stderr:
        record = json.loads(line) if line.startswith("{") else {}
        if record.get("event") == "serving":
            return record
    raise AssertionError(f"the host exited with {process.wait()} before serving")


@pytest.fixture
def hosts(tmp_path: Path, redis_server: RedisServer) -> Iterator[list[str]]:
    started: list[subprocess.Popen[str]] = []
    addresses = []
    try:
        for index, line in enumerate(commands()):
            port = free_port()
            line = line.replace(
                "redis://127.0.0.1:6379/", f"redis://127.0.0.1:{redis_server.port}/"
            )
            line = re.sub(r"--listen 127\.0\.0\.1:\d+", f"--listen 127.0.0.1:{port}", line)
            line = re.sub(r"--state-dir \S+", f"--state-dir {tmp_path / str(index)}", line)
            process = subprocess.Popen(
                ["bash", "-c", line.replace(" .venv/bin/ether ", " exec .venv/bin/ether ", 1)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            started.append(process)
            serving(process)
            # The rest of its log is read away, so a full pipe never blocks the host.
            threading.Thread(target=process.stderr.read, daemon=True).start()  # type: ignore[union-attr]
            addresses.append(f"127.0.0.1:{port}")
        yield addresses
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            process.wait(60)


def test_the_three_commands_make_one_cluster(hosts: list[str]) -> None:
    names = set()
    for address in hosts:
        with grpc.insecure_channel(address) as channel:
            info = supervisor_pb2_grpc.SupervisorServiceStub(channel).GetHostInfo(
                supervisor_pb2.GetHostInfoRequest(), timeout=30
            )
        cluster = info.host.cluster
        assert (cluster.advertise, cluster.degraded) == (address, "")
        assert cluster.host_name == f"{socket.gethostname()}:{address.rpartition(':')[2]}"
        names.add(cluster.host_name)
    # The last host to start read the other two as it joined.
    assert set(cluster.hosts) == names and len(names) == 3
