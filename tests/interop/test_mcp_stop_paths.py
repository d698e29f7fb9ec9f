"""docs/interop.md's row "stdin closed, then SIGTERM, SIGKILL (MCP's stdio shutdown)" for the
stops other than StopAgent (test_mcp_doc_claims.py has that one): RestartAgent, a scale-down and
host shutdown each close an MCP server's stdin first, signal it only once its stop_grace is over,
and kill one that ignores SIGTERM; the process that replaces or outlives it serves."""

from __future__ import annotations

import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import state_name, until, watch_until
from tests.support.calls import data, execute
from tests.support.host import HostProcess

from .test_mcp_doc_claims import SERVER, deploy_server

MODES = ["polite", "stubborn", "deaf"]

# The doc-claims server with one notes file per process, begun with "started": the replicas of
# one agent, and a process and the one that replaces it, share ETHER_AGENT_NAME but never
# ETHER_SPAWN_ID (the pid will not do: each may be pid 2 in a PID namespace of its own).
PER_PROCESS = {
    'f"{NAME}.notes"': "f\"{NAME}-{os.environ['ETHER_SPAWN_ID']}.notes\"",
    'server.run("stdio")': 'note("started")\nserver.run("stdio")',
}


def per_process_server() -> str:
    source = SERVER
    for old, new in PER_PROCESS.items():
        assert source.count(old) == 1, f"the doc-claims server changed: {old}"
        source = source.replace(old, new)
    return source


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's folder; also where its processes leave notes (granted read-write)."""
    made = tmp_path_factory.mktemp("mcp-stops")
    (made / "server.py").write_text(textwrap.dedent(per_process_server()))
    return made


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, folder: Path) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("mcp-stops-host"), shared=(folder,))
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


def deploy_mode(host: HostProcess, folder: Path, name: str, mode: str, **spec: object) -> int:
    """Deploy the server in ``mode``; the sequence of its RUNNING event. A polite one's grace is
    long, so that a signal it got could only be a stop's mistake; the others' is short."""
    grace = duration_pb2.Duration(seconds=30 if mode == "polite" else 1)
    args = ("server.py", str(folder), mode)
    running = deploy_server(host, folder, name, *args, stop_grace=grace, **spec)
    assert state_name(running.state) == "RUNNING", running.reason
    return int(running.sequence)


def notes(folder: Path, name: str) -> list[list[str]]:
    """What reached each process of ``name``, in order (sorted: a process still running has
    ["started"] alone, which sorts first)."""
    return sorted(path.read_text().splitlines() for path in folder.glob(f"{name}-*.notes"))


def stop_sequence(mode: str) -> list[str]:
    """A stopped process's notes: stdin closed first; SIGTERM only for one still there after its
    grace (the deaf one then lives on in them only until the SIGKILL)."""
    return ["started", "stdin closed", *(["SIGTERM"] if mode != "polite" else [])]


def ended(event: supervisor_pb2.WatchEventsResponse) -> tuple[str, int]:
    return ("signal", event.signal) if event.HasField("signal") else ("exit", event.exit_code)


def expected_end(mode: str) -> tuple[str, int]:
    # The deaf one ends by SIGKILL; the others exit 0 on their own (stdin's end, SIGTERM).
    return ("signal", signal.SIGKILL) if mode == "deaf" else ("exit", 0)


def served_by(host: HostProcess, name: str) -> int:
    """Call a tool of ``name``; the pid of the process that answered."""
    output = execute(host, name, "launch", timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    assert data(output) == {"result": "launched"}
    return int(output.metadata.pid)


@pytest.mark.parametrize("mode", MODES)
def test_a_restart_stops_the_old_process_like_a_stop(
    host: HostProcess, folder: Path, mode: str
) -> None:
    """RestartAgent: the old process sees stdin close, then (if still there after its
    stop_grace) SIGTERM, then SIGKILL; a new process answers the next call."""
    name = f"restart-{mode}"
    after = deploy_mode(host, folder, name, mode)
    old = served_by(host, name)
    request = supervisor_pb2.RestartAgentRequest(name=name)
    restarted = host.supervisor.RestartAgent(request, timeout=60)
    stopped = watch_until(host, name, {"STOPPED"}, after=after, replica=0)
    running = until(host, restarted.agent, {"RUNNING", "FATAL"})
    assert state_name(running.state) == "RUNNING", running.reason
    assert notes(folder, name) == [["started"], stop_sequence(mode)], stopped.reason
    assert ended(stopped) == expected_end(mode)
    assert served_by(host, name) not in (0, old)


@pytest.mark.parametrize("mode", MODES)
def test_a_scale_down_stops_the_replica_it_retires_like_a_stop(
    host: HostProcess, folder: Path, mode: str
) -> None:
    """ScaleAgent from 2 replicas to 1: replica 1 sees stdin close, then SIGTERM, SIGKILL as a
    stop's; replica 0 is left alone (its process, untouched, answers the next call)."""
    name = f"scale-{mode}"
    after = deploy_mode(host, folder, name, mode, replicas=2)
    for replica in (0, 1):  # both run (the deploy's event is the first one's)
        watch_until(host, name, {"RUNNING"}, replica=replica)
    assert notes(folder, name) == [["started"], ["started"]]
    listed = supervisor_pb2.ListProcessesRequest(agent=name)
    kept = host.supervisor.ListProcesses(listed, timeout=10).processes[0]
    assert kept.replica == 0
    request = supervisor_pb2.ScaleAgentRequest(name=name, replicas=1)
    host.supervisor.ScaleAgent(request, timeout=60)  # returns once replica 1 is down
    stopped = watch_until(host, name, {"STOPPED"}, after=after, replica=1)
    assert notes(folder, name) == [["started"], stop_sequence(mode)], stopped.reason
    assert ended(stopped) == expected_end(mode)
    [left] = host.supervisor.ListProcesses(listed, timeout=10).processes
    assert (left.replica, left.pid, state_name(left.state)) == (0, kept.pid, "RUNNING")
    assert served_by(host, name) == kept.pid


@pytest.mark.parametrize("mode", MODES)
def test_host_shutdown_stops_the_server_like_a_stop(
    tmp_path: Path, folder: Path, mode: str
) -> None:
    """SIGTERM to the host: its MCP server sees stdin close, then SIGTERM, SIGKILL as a stop's;
    the host logs the replica STOPPED and exits 0."""
    name = f"shutdown-{mode}"
    own = HostProcess(tmp_path / "state", shared=(folder,))
    try:
        own.wait_serving()
        deploy_mode(own, folder, name, mode)
        assert served_by(own, name) > 0
    finally:
        code = own.stop()
    assert code == 0
    # Written before the process ended, so already there when the host is gone.
    assert notes(folder, name) == [stop_sequence(mode)]
    own.wait_for_log(
        lambda record: (
            (record.get("event"), record.get("agent"), record.get("state"))
            == ("agent state", name, "STOPPED")
        )
    )
