"""A tiny host for the adapter's own tests: spawn ``python -m ether_agent`` on a module."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ADAPTER = Path(__file__).resolve().parents[1]


class Child:
    """An agent process with blocking, bounded reads of its frames."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._buf = b""

    def send(self, frame: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 10.0, skip: tuple[str, ...] = ()) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                frame: dict[str, Any] = json.loads(line)
                if frame.get("type") not in skip:
                    return frame
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError("no frame in time")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError("stdout closed")
            self._buf += chunk

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode()

    def close(self) -> int:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(10)


def spawn(module_dir: Path, *args: str, env: dict[str, str] | None = None) -> Child:
    full = {
        "PATH": os.environ.get("PATH", ""),
        "ETHER_HOST_COOKIE": "ether-agent-v1",
        "ETHER_PROTOCOL_VERSIONS": "1",
        "ETHER_HOST_PPID": str(os.getpid()),
        "PYTHONPATH": str(ADAPTER),
        **(env or {}),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "ether_agent", "--path", str(module_dir), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full,
        start_new_session=True,
    )
    return Child(proc)
