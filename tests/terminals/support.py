"""Helpers for the terminal tests: create, type, wait, read, look at /proc, and hold the host's
terminal records (a create held mid-start)."""

from __future__ import annotations

import os
import select
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess

PROMPT = "ether$ "
SHELL = ["bash", "--norc", "--noprofile"]
SHELL_ENV = {"PS1": PROMPT, "LANG": "C.UTF-8", "HISTFILE": "/dev/null"}


def seconds(value: float) -> duration_pb2.Duration:
    message = duration_pb2.Duration()
    message.FromNanoseconds(int(value * 1e9))
    return message


def create(
    host: HostProcess, argv: list[str] | None = None, *, command: str = "", **fields: Any
) -> pb.Terminal:
    """Create a terminal (default: a bash with PROMPT) in /tmp."""
    fields.setdefault("cwd", "/tmp")
    if command:
        request = pb.CreateTerminalRequest(command_line=command, **fields)
    else:
        if argv is None:
            argv = SHELL
            fields["env"] = {**SHELL_ENV, **fields.get("env", {})}
        request = pb.CreateTerminalRequest(argv=pb.Argv(args=argv), **fields)
    return host.terminals.CreateTerminal(request, timeout=30).terminal


def shell(host: HostProcess, **fields: Any) -> pb.Terminal:
    """A bash terminal, returned once its prompt is on the screen."""
    terminal = create(host, **fields)
    wait_screen(host, terminal.id, r"ether\$")
    return terminal


def write(
    host: HostProcess, terminal_id: str, text: str = "", **input_fields: Any
) -> pb.WriteInputResponse:
    terminal_input = (
        pb.TerminalInput(text=text, **input_fields) if text else pb.TerminalInput(**input_fields)
    )
    return host.terminals.WriteInput(
        pb.WriteInputRequest(terminal_id=terminal_id, input=terminal_input), timeout=30
    )


def wait(
    host: HostProcess, terminal_id: str, timeout: float = 30, **condition: Any
) -> pb.WaitForResponse:
    request = pb.WaitForRequest(terminal_id=terminal_id, timeout=seconds(timeout), **condition)
    return host.terminals.WaitFor(request, timeout=timeout + 10)


def wait_screen(
    host: HostProcess, terminal_id: str, regex: str, timeout: float = 30
) -> pb.WaitForResponse:
    return wait(host, terminal_id, timeout, screen=pb.ScreenCondition(regex=regex))


def wait_output(
    host: HostProcess, terminal_id: str, regex: str, after: int | None = None, timeout: float = 30
) -> pb.WaitForResponse:
    condition = pb.OutputCondition(regex=regex)
    if after is not None:
        condition.after_offset = after
    return wait(host, terminal_id, timeout, output=condition)


def wait_exit(host: HostProcess, terminal_id: str, timeout: float = 30) -> pb.WaitForResponse:
    return wait(host, terminal_id, timeout, exit=pb.ExitCondition())


def wait_quiet(
    host: HostProcess, terminal_id: str, quiet: float = 0.3, timeout: float = 30
) -> pb.WaitForResponse:
    return wait(host, terminal_id, timeout, quiet=pb.QuietCondition(duration=seconds(quiet)))


def run(host: HostProcess, terminal_id: str, command: str, marker: str = "") -> pb.WaitForResponse:
    """Type a command line into a shell terminal and wait for the next prompt after it."""
    offset = host.terminals.GetTerminal(
        pb.GetTerminalRequest(terminal_id=terminal_id), timeout=10
    ).terminal.output_offset
    write(host, terminal_id, command + "\r")
    # The prompt on a line of its own: a prompt redrawn in place (SIGWINCH) does not count.
    return wait_output(host, terminal_id, marker or r"\nether\$ $", after=offset)


def screen(host: HostProcess, terminal_id: str, **fields: Any) -> pb.Screen:
    fields.setdefault("format", pb.SCREEN_FORMAT_STRUCTURED)
    return host.terminals.ReadScreen(
        pb.ReadScreenRequest(terminal_id=terminal_id, **fields), timeout=30
    ).screen


def close(host: HostProcess, terminal_id: str, grace: float = 1.0) -> pb.Terminal:
    request = pb.CloseTerminalRequest(terminal_id=terminal_id, grace=seconds(grace))
    return host.terminals.CloseTerminal(request, timeout=30).terminal


def error_details(error: grpc.RpcError) -> dict[str, Any]:
    """google.rpc details of a failed call by type name (WaitForFailure included)."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    found: dict[str, Any] = {}
    if status is None:
        return found
    kinds = [
        error_details_pb2.ErrorInfo,
        error_details_pb2.BadRequest,
        error_details_pb2.ResourceInfo,
        error_details_pb2.RetryInfo,
        error_details_pb2.QuotaFailure,
        pb.WaitForFailure,
    ]
    for detail in status.details:
        for kind in kinds:
            if detail.Is(kind.DESCRIPTOR):
                message = kind()
                detail.Unpack(message)
                found[kind.DESCRIPTOR.name] = message
    return found


def processes_of(terminal_id: str, pumps: bool = True) -> dict[int, str]:
    """Live processes (pid -> state) whose environment names this terminal (ETHER_TERMINAL_ID):
    its program and what that started, and the host's two I/O pumps (``pumps=False``: not)."""
    needle = f"ETHER_TERMINAL_ID={terminal_id}".encode()
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        variables = environ.split(b"\0")
        if needle in variables and (
            pumps or not any(v.startswith(b"ETHER_PUMP=") for v in variables)
        ):
            found[int(name)] = stat[stat.rindex(")") + 2 :].split()[0]
    return found


def processes_at_least(terminal_id: str, count: int, budget: float = 30.0) -> dict[int, str]:
    """``processes_of`` once it finds at least ``count`` (polled within ``budget`` seconds; what
    it found last when it never does, for the caller's assertion): a process in the middle of
    exec hides its environment for a moment, longer on a loaded machine."""
    end = time.monotonic() + budget
    found = processes_of(terminal_id)
    while len(found) < count and time.monotonic() < end:
        time.sleep(0.02)
        found = processes_of(terminal_id)
    return found


def alive(pids: list[int]) -> list[int]:
    """The pids of ``pids`` that still exist (zombies included: they are leaks until reaped)."""
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


@contextmanager
def records_held(host: HostProcess) -> Iterator[None]:
    """A write transaction on the host's terminal records, for as long as the block runs: the
    host's writes of them wait meanwhile (up to its busy timeout, 5 s), and so does what it
    reports only once they are committed (a create's answer and `created` event)."""
    db = sqlite3.connect(
        host.state_dir / "terminals" / "terminals.sqlite3", isolation_level=None, timeout=30
    )
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
    finally:
        db.close()  # rolls the transaction back


def read_fifo(path: Path, within: float = 30.0) -> str:
    """What a writer of the FIFO at ``path`` writes first (opened before the writer starts)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        ready, _, _ = select.select([fd], [], [], within)
        assert ready, f"nothing was written to {path} within {within}s"
        return os.read(fd, 4096).decode().strip()
    finally:
        os.close(fd)
