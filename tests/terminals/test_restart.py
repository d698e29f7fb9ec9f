"""A terminal cannot outlive its PTY, but its id outlives the host: after a restart on the same
state directory, a terminal that had ended still shows its last screen and exit, and one that was
running when the host was killed answers NOT_FOUND saying it was lost in the restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.terminals.conftest import start_host
from tests.terminals.support import (
    close,
    create,
    error_details,
    run,
    screen,
    shell,
    wait_exit,
    write,
)


def refused(call: Callable[[], Any]) -> tuple[grpc.StatusCode, str, Any]:
    """The status code, message and ErrorInfo of a call that fails."""
    with pytest.raises(grpc.RpcError) as error:
        call()
    return error.value.code(), error.value.details() or "", error_details(error.value)["ErrorInfo"]


def get(host: HostProcess, terminal_id: str) -> pb.Terminal:
    return host.terminals.GetTerminal(
        pb.GetTerminalRequest(terminal_id=terminal_id), timeout=10
    ).terminal


def ended_terminals(host: HostProcess) -> dict[str, str]:
    """Two terminals that end before the restart: one exited (exit 3), one closed. By role."""
    exited = create(host, ["sh", "-c", "echo goodbye from sh; exit 3"], rows=10, cols=50)
    wait_exit(host, exited.id)  # reported: from here on it must survive a kill -9
    closed = shell(host, rows=12, cols=60)
    run(host, closed.id, "echo closed-after-$((6*7))")
    close(host, closed.id)
    return {"exited": exited.id, "closed": closed.id}


def assert_readable(host: HostProcess, ids: dict[str, str]) -> None:
    """GetTerminal and ReadScreen still answer for terminals that ended before the restart."""
    exited = get(host, ids["exited"])
    assert exited.state == pb.TERMINAL_STATE_CLOSED
    assert exited.HasField("exit_status") and exited.exit_status.code == 3
    assert exited.argv == ["sh", "-c", "echo goodbye from sh; exit 3"]
    last = screen(host, ids["exited"])
    assert last.lines[0] == "goodbye from sh" and (last.rows, last.cols) == (10, 50)
    assert last.exited and last.exit_status.code == 3
    assert (last.cursor.row, last.cursor.col) == (1, 0)

    closed = screen(host, ids["closed"])
    assert "closed-after-42" in closed.lines and (closed.rows, closed.cols) == (12, 60)
    assert get(host, ids["closed"]).state == pb.TERMINAL_STATE_CLOSED

    # Nothing of them runs: every other call is NOT_FOUND, saying why and what to do.
    code, message, info = refused(lambda: write(host, ids["exited"], "ls\r"))
    assert code == grpc.StatusCode.NOT_FOUND
    assert info.reason == "TERMINAL_ENDED_BEFORE_RESTART"
    assert "before the host restarted" in message and "ReadScreen" in message
    assert info.metadata["exit_code"] == "3"
    code, _, info = refused(lambda: close(host, ids["closed"]))
    assert code == grpc.StatusCode.NOT_FOUND and info.metadata["close_reason"] == "closed"


def test_after_sigterm_every_terminal_keeps_its_last_screen(tmp_path: Path) -> None:
    """A SIGTERM closes every terminal (reason shutdown) and records it: the next host shows
    the last screen of the one that was running, and of those that had ended."""
    state = tmp_path / "state"
    host = start_host(state)
    ids = ended_terminals(host)
    running = shell(host, rows=8, cols=40)
    run(host, running.id, "echo still-running-$((7*6))")
    assert host.stop() == 0

    host = start_host(state)
    try:
        assert_readable(host, ids)
        last = screen(host, running.id)
        assert "still-running-42" in last.lines and (last.rows, last.cols) == (8, 40)
        assert last.exited
        code, message, info = refused(lambda: write(host, running.id, "ls\r"))
        assert code == grpc.StatusCode.NOT_FOUND
        assert info.reason == "TERMINAL_ENDED_BEFORE_RESTART"
        assert info.metadata["close_reason"] == "shutdown" and "restarted" in message
        # An id that never existed is still just unknown; new terminals work as before.
        code, _, info = refused(lambda: get(host, "term-0000000000000000"))
        assert code == grpc.StatusCode.NOT_FOUND and info.reason == "TERMINAL_NOT_FOUND"
        fresh = shell(host)
        assert get(host, fresh.id).state == pb.TERMINAL_STATE_RUNNING
    finally:
        host.stop()


def test_after_kill_9_a_running_terminal_is_lost_and_ended_ones_are_readable(
    tmp_path: Path,
) -> None:
    """kill -9 of the host: what had ended is still readable; a terminal still running had no
    final screen, and its id answers NOT_FOUND with TERMINAL_LOST_IN_RESTART for every call."""
    state = tmp_path / "state"
    host = start_host(state)
    ids = ended_terminals(host)
    running = shell(host)
    run(host, running.id, "echo doomed")
    host.process.kill()
    host.process.wait()

    host = start_host(state)
    try:
        assert_readable(host, ids)
        stub, lost = host.terminals, running.id
        calls = [
            lambda: get(host, lost),
            lambda: screen(host, lost),
            lambda: write(host, lost, "ls\r"),
            lambda: stub.WaitFor(
                pb.WaitForRequest(terminal_id=lost, exit=pb.ExitCondition()), timeout=10
            ),
            lambda: list(
                stub.Attach(
                    iter([pb.AttachRequest(start=pb.AttachStart(terminal_id=lost))]), timeout=10
                )
            ),
        ]
        for call in calls:
            code, message, info = refused(call)
            assert code == grpc.StatusCode.NOT_FOUND
            assert info.reason == "TERMINAL_LOST_IN_RESTART"
            assert "still running when the host stopped" in message
            assert "create a new one" in message and "may have been closed" not in message
            assert info.metadata["host_restarted_at"]
        # A second restart does not forget what became of them.
        assert host.stop() == 0
        host = start_host(state)
        assert_readable(host, ids)
        _, _, info = refused(lambda: get(host, lost))
        assert info.reason == "TERMINAL_LOST_IN_RESTART"
    finally:
        host.stop()
