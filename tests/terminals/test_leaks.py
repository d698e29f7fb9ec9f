"""No leaks: every way a terminal ends takes its whole process tree with it -- including
grandchildren that left the process group with setsid or ignore SIGHUP with nohup.

Each test starts a shell that starts such grandchildren, notes every process carrying the
terminal's id in its environment (/proc/<pid>/environ), ends the terminal one way, and then
checks /proc: none of those pids exists any more, not even as a zombie. (The agent-stopped
path is in test_agents.py.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import pytest

from ether.v1 import terminal_pb2 as pb
from ether.v1 import terminal_pb2_grpc
from tests.support.host import HostProcess
from tests.support.procs import path_without, wait_gone
from tests.terminals.conftest import CONFIG, start_host
from tests.terminals.support import (
    alive,
    close,
    processes_at_least,
    processes_of,
    seconds,
    shell,
    wait_output,
    write,
)

# Each grandchild says when it runs: one in a session of its own (setsid; -w keeps its
# parent waiting, so it is no orphan the host's sweeper would take), one ignoring SIGHUP under
# nohup, one ignoring SIGHUP by itself. (`up-"1"` prints up-1, which the echo of the typed
# command line does not contain.)
GRANDCHILDREN = (
    "setsid -w sh -c 'echo up-\"1\"; exec sleep 3001' & "
    'nohup sleep 3002 >/dev/null 2>&1 & echo up-"2"; '
    'sh -c \'trap "" HUP; echo up-"3"; exec sleep 3003\' &\r'
)


def family(host: HostProcess, terminal_id: str) -> list[int]:
    """Start the grandchildren; return every pid of the terminal (shell included)."""
    write(host, terminal_id, GRANDCHILDREN)
    for marker in ("up-1", "up-2", "up-3"):
        wait_output(host, terminal_id, marker, after=0)
    pids = list(processes_at_least(terminal_id, 7))
    assert len(pids) >= 7, pids  # bash, setsid, three sleeps, and the host's two I/O pumps
    return pids


def closed_event(host: HostProcess, terminal_id: str) -> pb.WatchTerminalsResponse:
    stream = host.terminals.WatchTerminals(
        pb.WatchTerminalsRequest(include_existing=True), timeout=60
    )
    try:
        return next(
            e for e in stream if e.terminal.id == terminal_id and e.WhichOneof("event") == "closed"
        )
    finally:
        stream.cancel()


def test_close_ends_the_group_and_the_grandchildren(host: HostProcess) -> None:
    """CloseTerminal: SIGHUP, then SIGKILL for those that ignore it, then reap -- nothing is left."""
    terminal = shell(host)
    pids = family(host, terminal.id)
    closed = close(host, terminal.id, grace=0.5)
    assert closed.state == pb.TERMINAL_STATE_CLOSED and closed.exit_status.signal_name == "SIGHUP"
    assert alive(pids) == []


def test_idle_timeout_closes_a_quiet_terminal_and_its_processes(host: HostProcess) -> None:
    """A terminal without input or output for its idle timeout is closed (reason idle_timeout)."""
    terminal = shell(host, idle_timeout=seconds(1))
    pids = family(host, terminal.id)
    assert closed_event(host, terminal.id).closed.reason == "idle_timeout"
    assert alive(pids) == []


def test_max_lifetime_closes_even_a_busy_terminal(host: HostProcess) -> None:
    """A terminal that keeps printing is still closed at the end of its lifetime."""
    terminal = shell(host, max_lifetime=seconds(2), idle_timeout=seconds(600))
    pids = family(host, terminal.id)
    write(host, terminal.id, "while :; do echo tick; sleep 0.1; done\r")
    assert closed_event(host, terminal.id).closed.reason == "max_lifetime"
    assert alive(pids) == []


def test_a_program_that_exits_leaves_no_strays_once_closed(host: HostProcess) -> None:
    """A shell that exits on its own stays readable; closing it ends what it left running
    (in a PID namespace, what it left ends with it: the namespace dies with its program)."""
    terminal = shell(host)
    pids = family(host, terminal.id)
    programs = list(processes_of(terminal.id, pumps=False))
    write(host, terminal.id, "exit 0\r")
    info = host.terminals.WaitFor(
        pb.WaitForRequest(terminal_id=terminal.id, exit=pb.ExitCondition()), timeout=30
    )
    assert info.exit_status.code == 0 and info.screen.lines[info.screen.cursor.row - 1] == "exit"
    if shutil.which("bwrap"):
        assert wait_gone(programs, within=KILL_BUDGET) == []
    close(host, terminal.id, grace=0.5)
    assert alive(pids) == []


def test_host_shutdown_ends_every_terminal(tmp_path: Path) -> None:
    """Stopping the host closes all terminals (reason shutdown) and leaves no process behind."""
    host = start_host(tmp_path / "state")
    pids: list[int] = []
    watcher = grpc.insecure_channel(host.address)  # host.stop() closes the host's own channel
    try:
        for _ in range(3):
            terminal = shell(host)
            pids += family(host, terminal.id)
        stub = terminal_pb2_grpc.TerminalServiceStub(watcher)
        watch = stub.WatchTerminals(pb.WatchTerminalsRequest(), timeout=60)
    finally:
        code = host.stop()
    reasons = [e.closed.reason for e in watch if e.WhichOneof("event") == "closed"]
    watcher.close()
    assert code == 0 and reasons == ["shutdown"] * 3
    assert alive(pids) == []


# Every way a user detaches a job from the shell (after kill -9 of the host each one used to
# survive under init), then a foreground job, which job control puts in a process group of
# its own. `star"ted"` prints started, which the echo of the command line does not contain.
DETACHED = (
    "setsid sleep 3005 & nohup sleep 3006 >/dev/null 2>&1 & setsid --fork sleep 3007; "
    "(sleep 3008 &); python3 -c 'import os; os.fork() and os._exit(0); os.setsid(); "
    'os.fork() and os._exit(0); os.execvp("sleep", ["sleep", "3009"])\'; '
    'echo star"ted"; sleep 3004; echo never\r'
)
KILL_BUDGET = 30.0  # generous for a loaded machine; the kernel usually needs milliseconds


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_kill_minus_nine_of_the_host_ends_everything_its_terminals_started(
    tmp_path: Path,
) -> None:
    """kill -9 of the host: each terminal's PID namespace dies with it (bwrap's parent-death
    signal), so the shell, its foreground job and every job it detached (setsid, nohup,
    setsid --fork, a subshell, a double-forked daemon) are gone, and so are the I/O pumps."""
    _kill_host_and_check_its_terminals(start_host(tmp_path / "state"))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_kill_minus_nine_of_a_host_without_setpriv_ends_everything_too(tmp_path: Path) -> None:
    """The same where util-linux's setpriv is missing: the namespaces do not depend on it, and
    the pumps arm their parent-death signal with the host's Python instead (prctl, then exec
    of cat)."""
    config = tmp_path / "host.toml"
    config.write_text(CONFIG)
    tools = path_without(tmp_path / "bin", "setpriv")
    host = HostProcess(tmp_path / "state", "--config", str(config), env={"PATH": tools})
    host.wait_serving()
    _kill_host_and_check_its_terminals(host)


def _kill_host_and_check_its_terminals(host: HostProcess) -> None:
    terminal = shell(host)
    write(host, terminal.id, DETACHED)
    wait_output(host, terminal.id, "started", after=0)
    pids = list(processes_at_least(terminal.id, 9))
    # bash, six sleeps and the two pumps
    assert len(pids) >= 9, {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in pids}
    host.process.kill()
    host.process.wait()
    assert wait_gone(pids, within=KILL_BUDGET) == []
