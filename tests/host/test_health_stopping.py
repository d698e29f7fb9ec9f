"""/healthz and /readyz while the host stops (docs/health.md, "HTTP: /healthz and /readyz").

What a load balancer polling them cares about: the host leaves rotation as soon as it begins to
stop and says so for as long as it drains, so no new work is sent to a host that is draining
and the probe reads "not ready" rather than a closed port. Once SIGTERM begins the stop,
/readyz answers 503 with the reason "the host is stopping" and /healthz 503 NOT_SERVING, and
neither answers 200 again; every other route answers 503 HOST_STOPPING (nothing new starts);
a refused connection is only acceptable after that 503, once the drain is over. Every wait is
on an answer, a stream event or the host's exit, never on time."""

from __future__ import annotations

import base64
import json
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from google.rpc import error_details_pb2
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request, TextMessage

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, watch_until
from tests.support.calls import agent_input
from tests.support.host import HostProcess, sandbox_grants

STOP_WITHIN = 120  # seconds the whole stop may take on a loaded machine (a bound, not a check)
NAP_MS = 6000  # the task in flight when the signal comes: the drain lasts this long
GRACE_S = 60  # the host's shutdown_grace: the nap ends well within it
READY = {"status": "READY"}
LIVE = {"status": "SERVING"}
STOPPING = {"status": "NOT_READY", "reason": "the host is stopping"}
DEAD = {"status": "NOT_SERVING"}


@dataclass
class Poller:
    """GETs one path in a loop, each on a new connection, until the listener is gone (a
    transport error), the host has exited or the deadline passes; keeps every outcome."""

    address: str
    path: str
    host: HostProcess
    answers: list[tuple[int, Any]] = field(default_factory=list)  # (status, JSON body)
    gone: str = ""  # the transport error that ended the polling, if one did
    answered: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        deadline = time.monotonic() + STOP_WITHIN
        # No keep-alive, as a load balancer's probe: once the listener closes, a poll is
        # refused (or reset, when the closing listener had queued its connection).
        limits = httpx.Limits(max_keepalive_connections=0)
        with httpx.Client(base_url=self.address, timeout=30, limits=limits) as client:
            while self.host.process.poll() is None and time.monotonic() < deadline:
                try:
                    answer = client.get(self.path)
                except httpx.TransportError as error:
                    self.gone = repr(error)
                    return
                self.answers.append((answer.status_code, answer.json()))
                self.answered.set()

    def summary(self) -> str:
        statuses = [status for status, _ in self.answers]
        return (
            f"{self.path}: {statuses.count(200)} x 200, {statuses.count(503)} x 503 "
            f"of {len(statuses)}, last {self.answers[-3:]}, then {self.gone or 'no error'}"
        )


def _first_503(poller: Poller) -> bool:
    """Whether ``poller`` saw a 503 before its polling ended (waits on its answers)."""
    deadline = time.monotonic() + STOP_WITHIN
    while time.monotonic() < deadline:
        if any(status == 503 for status, _ in poller.answers):
            return True
        if poller.gone or poller.host.process.poll() is not None:
            return any(status == 503 for status, _ in poller.answers)
        poller.answered.wait(0.05)
        poller.answered.clear()
    return False


def test_health_routes_answer_503_while_the_host_stops(tmp_path: Path) -> None:
    """Ready and live while steady; after SIGTERM, with a task in flight that the host drains,
    each route answers 503 with its documented body (readiness: NOT_READY, "the host is
    stopping"; liveness: NOT_SERVING) before its listener refuses, and never 200 after that."""
    config = tmp_path / "host.toml"
    config.write_text(
        f"shutdown_grace = {GRACE_S}\n"
        + sandbox_grants()
        + f'[[agents]]\npath = "{AGENTS / "worker"}"\n'
    )
    host = HostProcess(tmp_path / "state", env={"ETHER_CONFIG": str(config)}, http=True)
    try:
        host.wait_serving()
        watch_until(host, "worker", {"RUNNING"})  # the config agent /readyz waits for

        # A task in flight when the signal comes: the host drains it before it exits.
        nap = agent_io_pb2.ExecuteStreamRequest(input=agent_input("worker", "nap", {"ms": NAP_MS}))
        task = host.agents.ExecuteStream(nap, timeout=STOP_WITHIN)
        assert next(task).WhichOneof("event") == "started"  # the worker runs it now

        # One poller per route, each in its own thread, so each sees the stop as soon as the
        # host answers it; both have had an answer from the steady host before the signal.
        pollers = [Poller(host.http_address, path, host) for path in ("/readyz", "/healthz")]
        threads = [threading.Thread(target=poller.run, daemon=True) for poller in pollers]
        for thread in threads:
            thread.start()
        for poller in pollers:
            assert poller.answered.wait(60), f"{poller.path}: no answer from the steady host"
        host.process.send_signal(signal.SIGTERM)  # the host this test started, by its pid
        readyz = pollers[0]
        assert _first_503(readyz), readyz.summary()
        # While the nap drains the listener is up: a new request is refused, not started, and
        # the probe still reads the stop (the nap has seconds left; the old order closed the
        # port ~0.1 s after the first 503).
        with httpx.Client(base_url=host.http_address, timeout=30) as client:
            refused = client.get("/mcp")
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["reason"] == "HOST_STOPPING"
            assert refused.headers["retry-after"] == "1"
            assert (client.get("/readyz").status_code, client.get("/healthz").status_code) == (
                503,
                503,
            )
        # Nor does a new call through the console's WebSocket bridge, which calls the gRPC
        # handlers in process (the draining gRPC port would refuse it): it ends at once.
        end = _bridge_end(host.http_address, "/rpc-ws/ether.v1.AgentIOService/Pipe")
        assert end["error"]["code"] == "unavailable", end
        reasons = [
            error_details_pb2.ErrorInfo.FromString(base64.b64decode(d["value"])).reason
            for d in end["error"]["details"]
            if d["type"] == "google.rpc.ErrorInfo"
        ]
        assert reasons == ["HOST_STOPPING"], end
        for thread in threads:
            thread.join(STOP_WITHIN + 30)
            assert not thread.is_alive()

        # The drain let the task in flight finish: its output is the stream's last event.
        assert [event.WhichOneof("event") for event in task][-1] == "output"
        assert host.process.wait(STOP_WITHIN) == 0  # a clean stop, not a second signal's
    finally:
        assert host.stop() == 0

    readyz, healthz = pollers
    for poller, steady, stopping in ((readyz, READY, STOPPING), (healthz, LIVE, DEAD)):
        # Some answers from the steady host, then the stop; nothing else.
        assert poller.answers[0] == (200, steady), poller.summary()
        first_503 = next((i for i, (status, _) in enumerate(poller.answers) if status == 503), None)
        assert first_503 is not None, (
            f"{poller.path} never answered 503 while the host stopped: " + poller.summary()
        )
        assert all(answer == (200, steady) for answer in poller.answers[:first_503]), (
            poller.summary()
        )
        # Once stopping, every answer is the documented 503: never ready or live again.
        assert all(answer == (503, stopping) for answer in poller.answers[first_503:]), (
            poller.summary()
        )


def _bridge_end(address: str, target: str) -> Any:
    """Open the console bridge's socket at ``target`` as a browser would and return the first
    text frame the host sends (before any of ours: the status a refused call ends with)."""
    parts = urlsplit(address)
    assert parts.hostname and parts.port, address
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        client = WSConnection(ConnectionType.CLIENT)
        conn.sendall(client.send(Request(host=parts.netloc, target=target)))
        while True:
            data = conn.recv(65536)
            assert data, "the host closed the bridge's socket without a status"
            client.receive_data(data)
            for event in client.events():
                if isinstance(event, TextMessage):
                    return json.loads(event.data)
                assert isinstance(event, AcceptConnection), f"refused: {event!r}"
