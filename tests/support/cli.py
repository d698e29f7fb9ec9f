"""The `ether` command run in the background by a test: its output read line by line with a
budget, and every command still running at the test's end killed and reaped."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from collections.abc import Callable
from typing import IO

from tests.support.host import ETHER, ROOT


class Lines:
    """The lines a child writes to one pipe, read by a thread so a test can wait for one with a
    budget instead of blocking on readline() forever."""

    def __init__(self, pipe: IO[str]) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe: IO[str]) -> None:
        for line in pipe:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)  # end of the pipe: the child closed it (it exited)

    def wait_for(self, wanted: Callable[[str], bool], timeout: float = 60) -> str:
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout}s; saw {self.seen}") from None
            if line is None:
                raise AssertionError(f"the output ended without such a line; saw {self.seen}")
            self.seen.append(line)
            if wanted(line):
                return line


class Commands:
    """`ether ...` commands started in the background, each in a session of its own as a shell
    runs a job (a SIGINT to one is the Ctrl-C a user types); ``close`` kills and reaps every
    one still running, so none is left behind."""

    def __init__(self) -> None:
        self._started: list[subprocess.Popen[str]] = []

    def start(self, address: str, *args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [str(ETHER), *args, "--address", address],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        self._started.append(process)
        return process

    def close(self) -> None:
        for process in self._started:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=30)
