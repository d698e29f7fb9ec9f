"""gRPC's own guidance for a server, held by the host: a call with one response and no deadline
of its own ends DEADLINE_EXCEEDED at the host's default (default_deadline); a client that pings
more often than keepalive_min_ping_interval gets GOAWAY too_many_pings while one that keeps to
it keeps its connection; a fault of the host's own is INTERNAL with a correlation id that the
host log has, never the exception's text, whether it happens in a method or a stream or while
a request is decoded."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, details
from tests.support.host import ROOT, HostProcess

SECRET = "s3cret-path /etc/ether/keys token=abc123"

# Faults planted in the host process (the sitecustomize module Python imports at start), as bugs
# of the host's own would be: in a unary method, in a stream after its first message, and in
# the check of a request as it is decoded.
PLANTED_FAULTS = f"""
from ether.v1 import supervisor_pb2
from ether_host.transport import validation
from ether_host.transport.supervisor import SupervisorServicer

_list = SupervisorServicer.ListProcesses
_watch = SupervisorServicer.WatchEvents
_checker = validation.checker


async def _faulty_list(self, request, context):
    if request.page_token == "fault":
        raise RuntimeError({SECRET!r})
    return await _list(self, request, context)


async def _faulty_watch(self, request, context):
    if request.agent != "fault":
        async for event in _watch(self, request, context):
            yield event
        return
    yield supervisor_pb2.WatchEventsResponse(agent="fault")
    raise ValueError({SECRET!r})


def _faulty_checker(descriptor):
    check = _checker(descriptor)
    if descriptor.name != "GetAgentRequest":
        return check

    def crash(request):
        if request.name == "fault":
            raise KeyError({SECRET!r})
        if check is not None:
            check(request)

    return crash


SupervisorServicer.ListProcesses = _faulty_list
SupervisorServicer.WatchEvents = _faulty_watch
validation.checker = _faulty_checker
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    folder = tmp_path_factory.mktemp("server-limits")
    planted = folder / "planted"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(PLANTED_FAULTS)
    process = HostProcess(
        folder / "state",
        "--default-deadline", "2",
        env={"PYTHONPATH": str(planted), "ETHER_KEEPALIVE_MIN_PING_INTERVAL": "3"},
    )  # fmt: skip
    try:
        process.wait_serving()
        deploy(process, AGENTS / "worker")
        yield process
    finally:
        process.stop()


def test_a_unary_call_without_a_deadline_ends_at_the_hosts_default(host: HostProcess) -> None:
    """Execute of a 10-minute nap with no deadline: DEADLINE_EXCEEDED naming the setting."""
    nap = agent_input("worker", "nap", {"ms": 600_000})
    with pytest.raises(grpc.RpcError) as error:
        host.agents.Execute(agent_io_pb2.ExecuteRequest(input=nap))
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, error.value.details()
    assert "default_deadline" in error.value.details()
    info = details(error.value)["ErrorInfo"]
    assert (info.reason, info.metadata["setting"]) == ("DEFAULT_DEADLINE", "default_deadline")
    # The caller's own deadline wins: a short nap within it is answered.
    short = agent_input("worker", "nap", {"ms": 10})
    host.agents.Execute(agent_io_pb2.ExecuteRequest(input=short), timeout=60)


def test_a_stream_without_a_deadline_is_not_cut(host: HostProcess) -> None:
    """WatchEvents follows for as long as the client reads: it gets no default deadline. The
    worker's next events (a scale to 2 replicas) still arrive after the default has passed:
    the first one only comes once a unary call has run into the default."""
    events = host.supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent="worker", after_sequence=-1)
    )
    nap = agent_input("worker", "nap", {"ms": 600_000})
    with pytest.raises(grpc.RpcError) as error:
        host.agents.Execute(agent_io_pb2.ExecuteRequest(input=nap))
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    host.supervisor.ScaleAgent(supervisor_pb2.ScaleAgentRequest(name="worker", replicas=2))
    assert next(events).agent == "worker"
    events.cancel()


PINGER = """
import sys, threading, grpc
address, every_ms, wait_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
options = [
    ("grpc.keepalive_time_ms", every_ms),
    ("grpc.keepalive_timeout_ms", 20000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
channel = grpc.insecure_channel(address, options=options)
ready, gone = threading.Event(), threading.Event()
def seen(state):
    if state == grpc.ChannelConnectivity.READY:
        ready.set()
    elif ready.is_set():
        gone.set()
channel.subscribe(seen, try_to_connect=True)
assert ready.wait(30), "never connected"
print("goaway" if gone.wait(wait_s) else "kept", flush=True)
"""


def _ping(host: HostProcess, every_ms: int, wait_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PINGER, host.address, str(every_ms), str(wait_s)],
        capture_output=True,
        text=True,
        timeout=wait_s + 60,
        check=False,
        cwd=ROOT,
    )


def test_a_client_pinging_too_often_gets_goaway_too_many_pings(host: HostProcess) -> None:
    """Pings every second (grpc's floor for a client) on a host that allows one every 3 s:
    after two strikes, GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and the connection is gone."""
    flood = _ping(host, 1000, 60)
    assert flood.stdout.strip() == "goaway", flood.stderr
    assert "too_many_pings" in flood.stderr


def test_a_client_keeping_to_the_interval_keeps_its_connection(host: HostProcess) -> None:
    """Pings every 4 s, with no call open, on a host that allows one every 3 s (grpc's own
    default allows one every 5 minutes, and none without a call): four pings later the
    connection is still up."""
    polite = _ping(host, 4000, 18)
    assert polite.stdout.strip() == "kept", polite.stderr
    assert "too_many_pings" not in polite.stderr


def _crashed(host: HostProcess, error: grpc.RpcError) -> None:
    """INTERNAL with a correlation id and none of the exception's text; the host log has the
    id, the exception and its text at error."""
    assert error.code() == grpc.StatusCode.INTERNAL, error.details()
    assert "s3cret" not in error.details() and "Error" not in error.details()
    assert "s3cret" not in str(error.debug_error_string())  # type: ignore[attr-defined]
    correlation_id = details(error)["ErrorInfo"].metadata["correlation_id"]
    assert correlation_id in error.details()
    crashed = host.wait_for_log(
        lambda r: r.get("event") == "rpc crashed" and r.get("correlation_id") == correlation_id
    )
    assert crashed["level"] == "error" and SECRET in crashed["exception"]


def test_a_fault_in_a_method_is_internal_without_its_text(host: HostProcess) -> None:
    with pytest.raises(grpc.RpcError) as error:
        host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(page_token="fault"), timeout=30
        )
    _crashed(host, error.value)


def test_a_fault_in_a_stream_is_internal_without_its_text(host: HostProcess) -> None:
    stream = host.supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent="fault"), timeout=30
    )
    next(stream)  # the stream had begun
    with pytest.raises(grpc.RpcError) as error:
        next(stream)
    _crashed(host, error.value)


def test_a_fault_while_a_request_is_decoded_is_internal_without_its_text(
    host: HostProcess,
) -> None:
    """grpc itself would answer UNKNOWN with the exception's class and text, unlogged."""
    with pytest.raises(grpc.RpcError) as error:
        host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="fault"), timeout=30)
    _crashed(host, error.value)
    # The host serves on.
    assert host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="worker"), timeout=30)


def test_the_planted_faults_are_only_where_planted(host: HostProcess) -> None:
    """ListProcesses, WatchEvents and GetAgent answer as usual otherwise."""
    listed = host.supervisor.ListProcesses(supervisor_pb2.ListProcessesRequest(), timeout=30)
    assert [p.agent for p in listed.processes][:1] == ["worker"]
