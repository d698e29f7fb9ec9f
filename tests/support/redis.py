"""A real ``redis-server`` of the test's own: a free loopback port, a temporary directory, no
persistence. It is ready when its log says it accepts connections and a PING answers (waited
on with a budget, never a sleep); it stops by its pid. ``stop()`` then ``start()`` brings it
back on the same port, as an operator restarting Redis would (an empty Redis: nothing was saved).

Without ``redis-server`` (Debian's redis-server package; ``make setup`` installs it as root) the
tests that need it skip on a developer's machine and FAIL under CI (``CI=true``): a green CI must
not hide a missing install step.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

READY_LINE = "Ready to accept connections"


def redis_server_or_skip() -> str:
    """The redis-server program; skips the test without it, fails it under CI."""
    program = shutil.which("redis-server")
    if program is None:
        message = (
            "redis-server is not installed (`make setup` as root installs Debian's redis-server)"
        )
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return program


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One redis-server process on 127.0.0.1, restartable on the same port."""

    def __init__(self, program: str, folder: Path) -> None:
        self.program = program
        self.folder = folder
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.lines: list[str] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> None:
        """Start on ``self.port`` and wait until it accepts connections."""
        assert self.process is None or self.process.poll() is not None, "already running"
        self.process = subprocess.Popen(
            [
                self.program,
                *("--port", str(self.port), "--bind", "127.0.0.1"),
                *("--dir", str(self.folder), "--save", "", "--appendonly", "no"),
                *("--logfile", "", "--daemonize", "no", "--protected-mode", "yes"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        ready = threading.Event()
        threading.Thread(target=self._read_log, args=(self.process, ready), daemon=True).start()
        if not ready.wait(timeout) or self.process.poll() is not None:
            self.stop()
            raise AssertionError(
                f"redis-server on port {self.port} not ready within {timeout}s:\n"
                + "\n".join(self.lines[-20:])
            )
        self._ping(timeout)

    def _read_log(self, process: subprocess.Popen[bytes], ready: threading.Event) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            self.lines.append(line)
            if READY_LINE in line:
                ready.set()
        ready.set()  # it exited: start() sees that and says why

    def _ping(self, timeout: float) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as connection:
            connection.sendall(b"PING\r\n")
            answer = connection.recv(64)
        assert answer.startswith(b"+PONG"), answer

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM by pid and wait for the exit (SIGKILL if it does not come)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def started_redis(folder: Path) -> Iterator[RedisServer]:
    """A started RedisServer in ``folder``, stopped afterwards; the body of the fixtures."""
    program = redis_server_or_skip()
    folder.mkdir(parents=True, exist_ok=True)
    for _ in range(3):  # the free port may be taken between the probe and the bind: retry
        server = RedisServer(program, folder)
        try:
            server.start()
            break
        except AssertionError:
            if not any("Address already in use" in line for line in server.lines):
                raise
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server for the tests of one module."""
    yield from started_redis(tmp_path_factory.mktemp("redis"))
