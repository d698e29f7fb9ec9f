"""SIGTERM: stop accepting, let in-flight RPCs finish within the grace, end follow-streams,
stop the agents, log "stopped" and exit 0."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, data

from ._support import Host

DEFAULT_GRACE = 5.0
WORKER_STOP_GRACE = 2.0  # tests/agents/worker/agent.toml
NAP_MS = 4000  # under the grace (5 s): the drain waits for it


def _start(tmp_path: Path, *args: str) -> Host:
    host = Host(
        "--listen",
        "127.0.0.1:0",
        "--state-dir",
        str(tmp_path / "state"),
        "--log-format",
        "json",
        *args,
    )
    host.wait_serving()
    deploy(host, AGENTS / "worker")
    return host


def _wait_in_flight(host: Host, timeout: float = 30.0) -> None:
    """Until the worker reports a task running (the Execute reached the agent)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent="worker"), timeout=10
        )
        if any(p.in_flight for p in listed.processes):
            return
    raise AssertionError("the Execute never reached the worker")


def _index(host: Host, predicate: object) -> int:
    record = host.wait_for_log(predicate)  # type: ignore[arg-type]
    return next(i for i, r in enumerate(host.records) if r is record)


def test_sigterm_drains_in_flight_rpcs_and_exits_0(tmp_path: Path) -> None:
    host = _start(tmp_path)
    try:
        events = host.supervisor.WatchEvents(
            supervisor_pb2.WatchEventsRequest(after_sequence=0), timeout=60
        )
        first = next(events)  # the stream is open on the server: it replayed the deploy
        assert first.agent == "worker"
        # A nap most of the grace long: still in flight when the follow-stream has ended.
        nap = agent_io_pb2.ExecuteRequest(input=agent_input("worker", "nap", {"ms": NAP_MS}))
        execute = host.agents.Execute.future(nap, timeout=60)
        _wait_in_flight(host)

        host.process.send_signal(signal.SIGTERM)

        # The follow-stream ends by itself, OK, while the drain still waits for the Execute (not
        # at the end of the grace, not never).
        ended: grpc.StatusCode = grpc.StatusCode.OK
        try:
            for _ in events:
                pass
        except grpc.RpcError as error:
            ended = error.code()
        assert ended == grpc.StatusCode.OK, ended
        assert not execute.done(), "the follow-stream lasted as long as the call in flight"

        # The unary call in flight completes normally during the drain.
        output = execute.result(timeout=30).output
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
        assert data(output) == {"slept": NAP_MS}
        assert host.process.wait(timeout=DEFAULT_GRACE + WORKER_STOP_GRACE + 10) == 0
    finally:
        host.stop()

    stopping = _index(host, lambda r: r.get("event") == "stopping")
    drained = _index(
        host, lambda r: r.get("event") == "rpc" and r.get("method", "").endswith("/Execute")
    )
    stopped = _index(host, lambda r: r.get("event") == "stopped")
    assert stopping < drained < stopped
    assert host.records[stopping]["signal"] == "SIGTERM"
    assert host.records[stopping]["grace_s"] == DEFAULT_GRACE  # the default, nothing set it
    assert host.records[drained]["code"] == "OK"


def test_rpc_longer_than_the_grace_is_cut_off(tmp_path: Path) -> None:
    """A call that would outlast the grace ends with an error when the grace is over (its 60 s
    nap is cut, within the 30 s this test waits); the host still exits 0."""
    grace = 0.5
    host = _start(tmp_path, "--shutdown-grace", str(grace))
    try:
        nap = agent_io_pb2.ExecuteRequest(input=agent_input("worker", "nap", {"ms": 60000}))
        execute = host.agents.Execute.future(nap, timeout=60)
        _wait_in_flight(host)
        host.process.send_signal(signal.SIGINT)
        error = execute.exception(timeout=30)
        assert isinstance(error, grpc.RpcError), "the call outlived the grace"
        assert error.code() == grpc.StatusCode.UNAVAILABLE, error  # retryable, elsewhere
        assert host.process.wait(timeout=30) == 0
    finally:
        host.stop()
    assert host.wait_for_log(lambda r: r.get("event") == "stopping")["signal"] == "SIGINT"
    host.wait_for_log(lambda r: r.get("event") == "stopped")


def test_sighup_stops_the_host_as_sigterm_does(tmp_path: Path) -> None:
    """The terminal that started `ether serve` closing (SIGHUP) stops the host cleanly, as
    SIGTERM does: "stopping" names SIGHUP, the agents are stopped, "stopped", exit 0 (SIGHUP's
    default action ended the host at once, exit -1, nothing drained)."""
    host = _start(tmp_path)
    try:
        listed = supervisor_pb2.ListProcessesRequest(agent="worker")
        [worker] = host.supervisor.ListProcesses(listed, timeout=10).processes
        host.process.send_signal(signal.SIGHUP)
        assert host.process.wait(timeout=60) == 0
    finally:
        host.stop()
    assert host.wait_for_log(lambda r: r.get("event") == "stopping")["signal"] == "SIGHUP"
    host.wait_for_log(lambda r: r.get("event") == "stopped")
    assert not Path(f"/proc/{worker.pid}").exists(), "the agent outlived its host"
