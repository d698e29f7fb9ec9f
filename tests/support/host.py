"""Start the real `ether serve` as a child process and talk to it over gRPC.

The host listens on port 0; its JSON log on stderr announces the bound
address (event "serving"), which is what the fixture waits for, followed by
a health check. No fixed ports, no sleeps.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import (
    agent_io_pb2_grpc,
    gateway_pb2_grpc,
    supervisor_pb2_grpc,
    terminal_pb2_grpc,
    workflow_pb2_grpc,
)

ROOT = Path(__file__).resolve().parents[2]
ETHER = ROOT / ".venv" / "bin" / "ether"
TOOLS = ROOT / ".tools" / "bin"


# The example agents that read this checkout (scout, wordcount, and the concierge, which answers
# questions about it) see it read-only, as examples/ether.toml grants for `make run`; the
# lifecycle test agent runs ../rogue/rogue.py.
READERS = ("scout", "wordcount", "concierge")


def sandbox_grants(shared: tuple[Path, ...] = ()) -> str:
    """The host config's [sandbox] table tests run with; ``shared``: folders a test and its
    agents both write (marker files), read-write."""
    rogue = ROOT / "tests" / "agents" / "rogue"
    writable = ", ".join(f'"{path}"' for path in shared)
    return f'[sandbox]\nread_only = ["{rogue}"]\nread_write = [{writable}]\n' + "".join(
        f'[sandbox.agents.{name}]\nread_only = ["{ROOT}"]\n' for name in READERS
    )


# Every host process started, strongly held: at exit, any still running is stopped (a run
# stopped by SIGTERM or Ctrl-C, a test that lost its HostProcess) -- see stop_leftover_hosts.
_PROCESSES: list[subprocess.Popen[bytes]] = []


def stop_leftover_hosts(grace: float = 10.0) -> None:
    """SIGTERM every host process still running, then SIGKILL what outlives ``grace``."""
    running = [p for p in _PROCESSES if p.poll() is None]
    for process in running:
        process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in running:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


atexit.register(stop_leftover_hosts)


class HostProcess:
    """A running `ether serve` with its log lines captured."""

    # Every host a test started, so a failing test can print their last log lines
    # (tests/conftest.py): what a stalled deploy or a crashed RPC left in the log.
    started: ClassVar[weakref.WeakSet[HostProcess]] = weakref.WeakSet()

    def __init__(
        self,
        state_dir: Path,
        *args: str,
        env: dict[str, str] | None = None,
        own_process_group: bool = False,
        unset: tuple[str, ...] = (),
        max_open_files: int | None = None,
        shared: tuple[Path, ...] = (),
        http: bool = False,
    ) -> None:
        """``http``: serve the HTTP listener too, on a free loopback port (``http_address``
        once serving)."""
        self.state_dir = state_dir
        self.shared = shared
        command = [
            str(ETHER),
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            str(state_dir),
            "--log-format",
            "json",
            *(("--http-listen", "127.0.0.1:0") if http else ()),
            *args,
        ]
        if max_open_files is not None:  # util-linux prlimit: the host starts with that limit
            command = ["prlimit", f"--nofile={max_open_files}", "--", *command]
        # Agents run sandboxed: the host config shows them what sandbox_grants() says. A
        # test's own --config or ETHER_CONFIG wins.
        default_config = state_dir.parent / f"{state_dir.name}.host.toml"
        default_config.write_text(sandbox_grants(shared))
        environment = (
            os.environ
            | {"PYTHONUNBUFFERED": "1", "ETHER_CONFIG": str(default_config)}
            | (env or {})
        )
        for name in unset:
            environment.pop(name, None)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment,
            # As a shell starts a foreground job: a Ctrl-C then reaches the host, not pytest.
            process_group=0 if own_process_group else None,
        )
        # Only the running ones stay held: a Popen keeps its pipes open while it lives.
        _PROCESSES[:] = [p for p in _PROCESSES if p.poll() is None]
        _PROCESSES.append(self.process)
        self.records: list[dict[str, Any]] = []
        self.raw_lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        self.address = ""
        self.http_address = ""  # http://127.0.0.1:PORT when started with http=True
        self._channel: grpc.Channel | None = None
        self.started_at = time.monotonic()
        HostProcess.started.add(self)

    def _read_log(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            with self._changed:
                self.raw_lines.append(line)
                try:
                    record = json.loads(line)
                except ValueError:
                    record = {"event": line}
                self.records.append(record if isinstance(record, dict) else {"event": line})
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def last_lines(self, count: int = 40) -> list[str]:
        with self._changed:
            return self.raw_lines[-count:]

    def wait_for_log(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 30.0,
        *,
        after: int = 0,
    ) -> dict[str, Any]:
        """The first log record matching ``predicate``, waiting for it to be written; with
        ``after`` (a ``len(host.records)`` taken earlier), only records written since."""
        deadline = time.monotonic() + timeout
        seen = after
        with self._changed:
            while True:
                for record in self.records[seen:]:
                    if predicate(record):
                        return record
                seen = len(self.records)
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(
                        f"no matching log record within {timeout}s; host exit={self.process.poll()}; last lines:\n"
                        + "\n".join(self.raw_lines[-30:])
                    )
                self._changed.wait(left)

    def wait_serving(self, timeout: float = 60.0) -> str:
        record = self.wait_for_log(lambda r: r.get("event") == "serving", timeout)
        self.address = record["addresses"][0]
        self.http_address = record.get("http") or ""
        health = health_pb2_grpc.HealthStub(self.channel)
        response = health.Check(
            health_pb2.HealthCheckRequest(service=""), timeout=timeout, wait_for_ready=True
        )
        assert response.status == health_pb2.HealthCheckResponse.SERVING
        return self.address

    @property
    def channel(self) -> grpc.Channel:
        if self._channel is None:
            options = [
                ("grpc.max_receive_message_length", 64 * 1024 * 1024),
                ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ]
            self._channel = grpc.insecure_channel(self.address, options=options)
        return self._channel

    @property
    def agents(self) -> agent_io_pb2_grpc.AgentIOServiceStub:
        return agent_io_pb2_grpc.AgentIOServiceStub(self.channel)

    @property
    def supervisor(self) -> supervisor_pb2_grpc.SupervisorServiceStub:
        return supervisor_pb2_grpc.SupervisorServiceStub(self.channel)

    @property
    def workflows(self) -> workflow_pb2_grpc.WorkflowServiceStub:
        return workflow_pb2_grpc.WorkflowServiceStub(self.channel)

    @property
    def terminals(self) -> terminal_pb2_grpc.TerminalServiceStub:
        return terminal_pb2_grpc.TerminalServiceStub(self.channel)

    @property
    def gateway(self) -> gateway_pb2_grpc.GatewayServiceStub:
        return gateway_pb2_grpc.GatewayServiceStub(self.channel)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait for a clean exit; returns the exit code."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("host did not exit within its shutdown deadline") from None


def python() -> str:
    return sys.executable
