"""A client that cancels a call is normal: the host logs no error for it, only for real faults."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import (
    agent_io_pb2,
    agent_io_pb2_grpc,
    supervisor_pb2,
    supervisor_pb2_grpc,
    terminal_pb2,
    terminal_pb2_grpc,
)
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, details
from tests.support.host import HostProcess

STREAMS_PER_KIND = 20
ATTACHES = 100
ROUNDS = 3
# A fault planted in the host process (the sitecustomize module Python imports at start):
# ListProcesses with this page token raises, as a bug in a servicer would.
FAULT_TOKEN = "plant-a-fault"
PLANTED_FAULT = f"""
from ether_host.transport.supervisor import SupervisorServicer

_list = SupervisorServicer.ListProcesses


async def _faulty(self, request, context):
    if request.page_token == {FAULT_TOKEN!r}:
        raise RuntimeError("a planted fault")
    return await _list(self, request, context)


SupervisorServicer.ListProcesses = _faulty
"""


@pytest.fixture
def host(tmp_path: Path) -> Iterator[HostProcess]:
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(PLANTED_FAULT)
    process = HostProcess(tmp_path / "state", env={"PYTHONPATH": str(planted)})
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


def _requests(first: Any, done: threading.Event) -> Iterator[Any]:
    """A request stream that sends ``first`` and stays open until ``done``."""
    yield first
    done.wait()


def _is_line(record: dict[str, Any], methods: tuple[str, ...]) -> bool:
    """Whether ``record`` is the per-RPC line of a call to one of ``methods``."""
    return record.get("event") == "rpc" and str(record.get("method")).endswith(methods)


def _count_lines(host: HostProcess, methods: tuple[str, ...]) -> int:
    return sum(1 for r in list(host.records) if _is_line(r, methods))


def _errors(host: HostProcess) -> list[dict[str, Any]]:
    return [r for r in host.records if r.get("level") in ("error", "critical")]


def _output_offset(host: HostProcess, terminal_id: str) -> int:
    request = terminal_pb2.GetTerminalRequest(terminal_id=terminal_id)
    return host.terminals.GetTerminal(request, timeout=30).terminal.output_offset


def _cancel_a_round(host: HostProcess, agent: str, terminal_id: str) -> None:
    """Open streams of five kinds on one connection (as one client's streams share one), read
    the first message of each, let the terminal print 4 MB more, then cancel them all."""
    channel = grpc.insecure_channel(host.address)
    done = threading.Event()
    try:
        agents = agent_io_pb2_grpc.AgentIOServiceStub(channel)
        supervisor = supervisor_pb2_grpc.SupervisorServiceStub(channel)
        terminals = terminal_pb2_grpc.TerminalServiceStub(channel)
        chatter = agent_input(agent, "chatter", {"ms": 60_000})
        attach = terminal_pb2.AttachRequest(start=terminal_pb2.AttachStart(terminal_id=terminal_id))
        calls: list[Any] = []
        for _ in range(STREAMS_PER_KIND):
            calls += [
                agents.ExecuteStream(agent_io_pb2.ExecuteStreamRequest(input=chatter), timeout=60),
                supervisor.StreamLogs(
                    supervisor_pb2.StreamLogsRequest(agent=agent, tail_lines=10000, follow=True),
                    timeout=60,
                ),
                supervisor.WatchEvents(
                    supervisor_pb2.WatchEventsRequest(after_sequence=0), timeout=60
                ),
            ]
        # Attach streams of a terminal printing without pause are what a cancellation catches
        # in the middle of a write; the more of them, the more often it does.
        calls += [terminals.Attach(_requests(attach, done), timeout=60) for _ in range(ATTACHES)]
        # A Pipe writes once its task ends, so none is read.
        pipes = [
            agents.Pipe(_requests(agent_io_pb2.PipeRequest(input=chatter), done), timeout=60)
            for _ in range(STREAMS_PER_KIND)
        ]
        for call in calls:
            next(call)  # the stream is open on the host and has written
        # The attached streams' writes now wait for a client that does not read.
        start = _output_offset(host, terminal_id)
        while _output_offset(host, terminal_id) < start + 4_000_000:
            pass
        for call in calls + pipes:
            call.cancel()
    finally:
        done.set()
        channel.close()


def test_cancelled_streams_log_no_errors_but_a_real_fault_does(host: HostProcess) -> None:
    """Streams of five kinds (ExecuteStream, Pipe, StreamLogs, WatchEvents, Attach), each busy
    writing, are cancelled by the client together, three times over: the host logs no
    error-level record for any of them and goes on serving. A fault of the host's own still
    logs "rpc crashed" at error, with the correlation id the client got."""
    # Slots for every task at once: a queued ExecuteStream would write nothing to read.
    agent = deploy(host, AGENTS / "rogue", name="busy", env={"ROGUE_CONCURRENCY": "256"})
    for _ in range(100):  # six stderr lines each: a log tail worth writing
        host.agents.Execute(
            agent_io_pb2.ExecuteRequest(input=agent_input(agent, "stderr")), timeout=30
        )
    terminal = host.terminals.CreateTerminal(
        terminal_pb2.CreateTerminalRequest(argv=terminal_pb2.Argv(args=["yes"]), cwd="/tmp"),
        timeout=30,
    ).terminal
    for _ in range(ROUNDS):
        _cancel_a_round(host, agent, terminal.id)

    # Every cancelled call has ended with its line (each call's line comes after any error it
    # logged), and the host still serves.
    opened = ROUNDS * (STREAMS_PER_KIND * 4 + ATTACHES)
    streamed = ("/ExecuteStream", "/Pipe", "/StreamLogs", "/WatchEvents", "/Attach")
    host.wait_for_log(lambda r: _count_lines(host, streamed) >= opened, timeout=120)
    assert _errors(host) == []
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent=agent), timeout=30
    )
    assert listed.processes

    with pytest.raises(grpc.RpcError) as failed:
        host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(page_token=FAULT_TOKEN), timeout=30
        )
    assert failed.value.code() == grpc.StatusCode.INTERNAL
    correlation_id = details(failed.value)["ErrorInfo"].metadata["correlation_id"]
    crashed = host.wait_for_log(lambda r: r.get("event") == "rpc crashed")
    assert crashed["level"] == "error" and crashed["correlation_id"] == correlation_id
    assert "planted fault" in crashed["exception"]
