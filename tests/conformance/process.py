"""An agent process under test: spawned with the host's env contract, read and written in
threads so no wait is ever unbounded."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from .languages import REPO

COOKIE = "ether-agent-v1"
DEFAULT_MAX_FRAME = 16 * 1024 * 1024
ENV_ALLOW = ("PATH", "LANG", "TZ", "TERM")
STDERR_KEEP = 1 << 20

# Events from the agent's stdout.
FRAME, NOISE, EOF = "frame", "noise", "eof"


def agent_env(overrides: dict[str, Any] | None = None) -> dict[str, str]:
    """The child environment of docs/protocol.md: an allowlist plus the ETHER_* contract.
    ``overrides`` may set variables, or remove them with None."""
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW or k.startswith("LC_")}
    env.update(
        ETHER_HOST_COOKIE=COOKIE,
        ETHER_PROTOCOL_VERSIONS="1",
        ETHER_HOST_PPID=str(os.getpid()),
        ETHER_AGENT_NAME="conformance",
        ETHER_MAX_FRAME=str(DEFAULT_MAX_FRAME),
        ETHER_SPAWN_ID=uuid.uuid4().hex,
        HOME=os.environ.get("HOME") or tempfile.gettempdir(),
        TMPDIR=tempfile.gettempdir(),
        PYTHONPATH=str(REPO / "adapters" / "python"),
        GOCACHE=os.environ.get("GOCACHE") or str(Path(tempfile.gettempdir()) / "ether-gocache"),
        PYTHONUNBUFFERED="1",
    )
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


# A stand-in host for the host_death scenario: it starts the agent as the host would (own
# session, its pid in ETHER_HOST_PPID), hands it the driver's pipes, and can be SIGKILLed.
RELAY = """
import os, subprocess, sys
os.environ["ETHER_HOST_PPID"] = str(os.getpid())
sys.exit(subprocess.Popen(sys.argv[1:], start_new_session=True).wait())
"""


class AgentProcess:
    """One child: frames and noise from stdout as events, stderr kept, stdin written by a thread.

    With ``relay`` the child is a stand-in host (RELAY) that starts the agent."""

    def __init__(
        self, argv: list[str], *, env: dict[str, str], cwd: str, label: str, relay: bool = False
    ) -> None:
        self.label = label
        self.argv = argv
        self.extra_groups: list[int] = []  # process groups to kill at the end (relay mode)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", RELAY, *argv] if relay else argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            bufsize=0,
            start_new_session=True,  # own process group, as the host spawns agents
        )
        self.pid = self.proc.pid
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.history: list[str] = []  # short descriptions of what came out, for failure reports
        self._stderr = bytearray()
        self._stderr_cond = threading.Condition()
        self._stderr_done = False
        self._stdin_open = True
        self._writes: queue.Queue[tuple[bytes, threading.Event, list[BaseException]] | None] = (
            queue.Queue()
        )
        for target, name in (
            (self._read_stdout, "stdout"),
            (self._read_stderr, "stderr"),
            (self._write_stdin, "stdin"),
        ):
            threading.Thread(target=target, name=f"{label}-{name}", daemon=True).start()

    # --- stdout --------------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            scan = len(buf)  # bytes before it hold no newline
            buf += chunk
            start = 0
            while True:
                nl = buf.find(b"\n", max(start, scan))
                if nl < 0:
                    break
                self._line(bytes(buf[start:nl]))
                start = nl + 1
            del buf[:start]
        if buf:
            self._line(bytes(buf))
        self.events.put((EOF, None))

    def _line(self, raw: bytes) -> None:
        raw = raw.rstrip(b"\r")
        if not raw:
            return
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            self.events.put((NOISE, raw))
            return
        if not isinstance(value, dict):
            self.events.put((NOISE, raw))
            return
        if "type" not in value and "status" in value:  # the seeds' envelope: a result
            value["type"] = "result"
        self.events.put((FRAME, value))

    def next_event(self, timeout: float) -> tuple[str, Any] | None:
        """The next stdout event, or None after ``timeout`` seconds."""
        try:
            kind, value = self.events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        self.history.append(describe(kind, value))
        return kind, value

    # --- stderr --------------------------------------------------------------------------------

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        while True:
            chunk = os.read(fd, 65536)
            with self._stderr_cond:
                if not chunk:
                    self._stderr_done = True
                    self._stderr_cond.notify_all()
                    return
                self._stderr += chunk
                if len(self._stderr) > STDERR_KEEP:
                    del self._stderr[: len(self._stderr) - STDERR_KEEP]
                self._stderr_cond.notify_all()

    def stderr_text(self) -> str:
        with self._stderr_cond:
            return self._stderr.decode("utf-8", "replace")

    def wait_stderr(self, needle: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        data = needle.encode()
        with self._stderr_cond:
            while data not in self._stderr:
                left = deadline - time.monotonic()
                if left <= 0 or self._stderr_done:
                    return data in self._stderr
                self._stderr_cond.wait(left)
            return True

    # --- stdin ---------------------------------------------------------------------------------

    def _write_stdin(self) -> None:
        assert self.proc.stdin is not None
        fd = self.proc.stdin.fileno()
        while True:
            item = self._writes.get()
            if item is None:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
                return
            data, done, errors = item
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(fd, view) :]
            except OSError as exc:
                errors.append(exc)
            done.set()

    def write(self, data: bytes, timeout: float) -> str | None:
        """Write bytes to the agent's stdin; an error text, or None when written."""
        if not self._stdin_open:
            return "stdin is already closed"
        done = threading.Event()
        errors: list[BaseException] = []
        self._writes.put((data, done, errors))
        if not done.wait(timeout):
            return f"the agent did not read {len(data)} bytes from stdin within {timeout:.0f} s"
        return f"writing to stdin failed: {errors[0]}" if errors else None

    def send(self, frame: dict[str, Any], timeout: float) -> str | None:
        line = json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        return self.write(line, timeout)

    def close_stdin(self) -> None:
        if self._stdin_open:
            self._stdin_open = False
            self._writes.put(None)

    # --- lifetime ------------------------------------------------------------------------------

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def stop(self) -> None:
        """Close stdin, give the agent 2 s, then kill its whole process group and reap it."""
        self.close_stdin()
        if self.wait_exit(2.0) is None:
            pass
        for group in [self.pid, *self.extra_groups]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        self.wait_exit(5.0)


def describe(kind: str, value: Any, limit: int = 300) -> str:
    if kind == FRAME:
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= limit else f"{text[: limit - 30]}...<{len(text)} chars>"
    if kind == NOISE:
        return f"non-frame stdout line: {value[:120]!r}"
    return "<stdout closed>"
