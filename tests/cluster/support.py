"""Hosts of one cluster for the tests: real ``ether serve`` processes sharing a real redis-server
(tests/support/redis.py), each with its own state folder and loopback port."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ether.v1 import agent_io_pb2
from tests.support.host import HostProcess

HEARTBEAT = 0.5
# Long enough that a host slowed by a loaded machine is not taken for dead; the tests that wait
# for a dropout wait on the survivors' "cluster host left" log line, not on a clock.
DROPOUT = 5.0


def cluster_env(redis_url: str, name: str) -> dict[str, str]:
    return {
        "ETHER_CLUSTER_REDIS_URL": redis_url,
        "ETHER_CLUSTER_HOST_NAME": name,
        "ETHER_CLUSTER_HEARTBEAT": str(HEARTBEAT),
        "ETHER_CLUSTER_DROPOUT": str(DROPOUT),
    }


def cluster_host(
    folder: Path,
    redis_url: str,
    name: str,
    *,
    http: bool = False,
    env: dict[str, str] | None = None,
    shared: tuple[Path, ...] = (),
) -> HostProcess:
    """A started host named ``name`` in the cluster on ``redis_url``; ``env`` adds to its
    environment, ``shared``: folders its agents may write (HostProcess)."""
    environment = cluster_env(redis_url, name) | (env or {})
    host = HostProcess(folder / name, env=environment, http=http, shared=shared)
    try:
        host.wait_serving()
    except BaseException:
        host.stop()
        raise
    return host


def published(host: HostProcess, agent: str, state: str = "RUNNING", timeout: float = 60.0) -> None:
    """Wait until ``host`` has written ``agent`` in ``state`` to the directory: from then on
    every host reading the directory sees it."""
    host.wait_for_log(
        lambda r: (
            r.get("event") == "cluster published" and (r.get("agents") or {}).get(agent) == state
        ),
        timeout,
    )


def listed(host: HostProcess) -> dict[str, agent_io_pb2.AgentInfo]:
    """Every agent ListAgents on ``host`` shows, by name (one page: the tests deploy few)."""
    response = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=30)
    assert not response.next_page_token
    return {a.name: a for a in response.agents}


def hosts_of(info: agent_io_pb2.AgentInfo) -> dict[str, agent_io_pb2.AgentHost]:
    return {h.host: h for h in info.hosts}


def exited_with(host: HostProcess, timeout: float = 60.0) -> tuple[int, str]:
    """The exit code of a host that refused to start, and what it printed."""
    code = host.process.wait(timeout)
    host._reader.join(timeout)  # every line it wrote is read once stderr closes
    return code, "\n".join(host.raw_lines)


class TallyLedger:
    """What the tally agent (tests/agents/tally) shares with a test through ``self.ledger``, a
    folder every host binds: a file per run of a task, and the gates its runs wait for. Each
    module's ``Hosts`` takes these from here."""

    ledger: Path

    def ran(self, task_id: str) -> Counter[int]:
        """How often tally ran ``task_id``, by the pid of the host that ran it."""
        files = self.ledger.glob(f"{task_id}.*.ran")
        return Counter(int(f.name[len(task_id) + 1 :].split(".")[0]) for f in files)

    def open_gate(self, gate: str) -> None:
        (self.ledger / gate).write_text("open\n")
