"""Clients that open server streams and never read them cost the host bounded memory and do not
slow anyone else: 200 such streams (WatchEvents, StreamLogs with follow, Attach, Converse) while
an agent floods its log, a terminal prints a million lines and a session streams reply chunks."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import (
    agent_io_pb2,
    agent_io_pb2_grpc,
    gateway_pb2,
    gateway_pb2_grpc,
    supervisor_pb2,
    supervisor_pb2_grpc,
    terminal_pb2,
    terminal_pb2_grpc,
)
from tests.gateway._support import Conversation, open_session
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, data, execute
from tests.support.host import HostProcess
from tests.terminals.support import run, shell

STREAMS_PER_KIND = 50
LOG_LINES = 10_000  # of 1,000 characters: 10 MB of log
TERMINAL_LINES = 1_000_000  # `seq`: 6.9 MB of output
REPLY_CHUNKS = 500
# A non-reading stream may hold its HTTP/2 window (64 KiB) and one message in flight; 200 of
# them a few tens of MiB. Buffering per stream without bound would take GBs here (every stream
# would keep the whole 10 MB log or 6.9 MB of output).
RSS_GROWTH_BOUND_MIB = 256


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def held_open(first: Any, stop: threading.Event) -> Iterator[Any]:
    """A request stream that sends its first message and then stays open until ``stop``."""
    yield first
    stop.wait()


def test_200_streams_that_never_read_keep_the_host_bounded_and_usable(tmp_path: Path) -> None:
    host = HostProcess(tmp_path / "state")
    host.wait_serving()
    stop = threading.Event()
    calls: list[Any] = []
    idle = grpc.insecure_channel(host.address)  # the slow clients' connection
    try:
        noisy = deploy(host, AGENTS / "noisy")
        chatter = deploy(host, AGENTS / "chatter")
        terminal = shell(host)
        session = open_session(host, agent=chatter)
        # Warm every path once; each stream below then has something to replay first.
        execute(host, noisy, "shout", {"lines": 10, "size": 10})
        warm = Conversation(host, session.id)
        try:
            warm.turn("hello")
        finally:
            warm.close()
        before = rss_mib(host.process.pid)

        supervisor = supervisor_pb2_grpc.SupervisorServiceStub(idle)
        terminals = terminal_pb2_grpc.TerminalServiceStub(idle)
        gateway = gateway_pb2_grpc.GatewayServiceStub(idle)
        attach = terminal_pb2.AttachRequest(start=terminal_pb2.AttachStart(terminal_id=terminal.id))
        converse = gateway_pb2.ConverseRequest(
            start=gateway_pb2.ConverseStart(session_id=session.id, after_sequence=0)
        )
        for _ in range(STREAMS_PER_KIND):
            calls.append(
                supervisor.WatchEvents(
                    supervisor_pb2.WatchEventsRequest(after_sequence=0), timeout=600
                )
            )
            calls.append(
                supervisor.StreamLogs(
                    supervisor_pb2.StreamLogsRequest(agent=noisy, follow=True), timeout=600
                )
            )
            calls.append(terminals.Attach(held_open(attach, stop), timeout=600))
            calls.append(gateway.Converse(held_open(converse, stop), timeout=600))
        # One message from each says it is being served; from here on nobody reads them.
        for call in calls:
            next(call)

        # The flood: an agent's log, a terminal's output, a session's reply chunks.
        assert data(execute(host, noisy, "shout", {"lines": LOG_LINES}, timeout=120)) == {
            "lines": LOG_LINES
        }
        run(host, terminal.id, f"seq 1 {TERMINAL_LINES}; echo flood-done", r"\nflood-done")
        talk = Conversation(host, session.id)
        try:
            talk.say(f"chunks {REPLY_CHUNKS}")
            talk.until(lambda e: e.WhichOneof("event") == "turn_completed")
        finally:
            talk.close()

        growth = rss_mib(host.process.pid) - before
        assert growth < RSS_GROWTH_BOUND_MIB, f"host RSS grew by {growth:.0f} MiB"
        # A normal client on its own connection is served, within its deadline.
        with grpc.insecure_channel(host.address) as other:
            stub = agent_io_pb2_grpc.AgentIOServiceStub(other)
            answer = stub.Execute(
                agent_io_pb2.ExecuteRequest(input=agent_input(noisy, "echo", {"ok": 1})),
                timeout=30,
            )
            assert data(answer.output) == {"ok": 1}

        for call in calls:
            call.cancel()
        stop.set()
        # Cancelled, the streams are gone: the host serves as before.
        health = health_pb2_grpc.HealthStub(host.channel)
        assert (
            health.Check(health_pb2.HealthCheckRequest(), timeout=30).status
            == health_pb2.HealthCheckResponse.SERVING
        )
        assert data(execute(host, noisy, "echo", {"after": True})) == {"after": True}
        run(host, terminal.id, "echo still-here", r"\nstill-here")
    finally:
        for call in calls:
            call.cancel()
        stop.set()
        idle.close()
        host.stop()
