"""`ether term` as a user runs it against a real host: new, ls, screen and kill; attach from a
pipe (input in, output out, the program's exit status); and attach from a real terminal (raw
keys, the window's size, Ctrl-] to detach without ending the program)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time

from ether.v1 import terminal_pb2
from tests.support.host import ETHER, ROOT, HostProcess
from tests.terminals.support import wait_screen


def ether(host: HostProcess, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ETHER), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=os.environ | {"ETHER_ADDRESS": host.address},
    )


def _terminal(host: HostProcess, terminal_id: str) -> terminal_pb2.Terminal:
    return host.terminals.GetTerminal(
        terminal_pb2.GetTerminalRequest(terminal_id=terminal_id), timeout=10
    ).terminal


def test_new_ls_piped_attach_screen_and_kill(host: HostProcess) -> None:
    """new prints the id and ls lists it; attach with piped stdin types it and exits with the
    program's status; screen prints what the program showed; kill closes a running one."""
    created = ether(host, "term", "new", "--name", "cli-demo", "--", "bash", "--norc")
    assert created.returncode == 0, created.stderr
    terminal_id = created.stdout.strip()
    assert terminal_id.startswith("term-")
    listed = ether(host, "term", "ls").stdout.splitlines()
    row = next(line.split() for line in listed if line.startswith(terminal_id))
    assert row[1:4] == ["cli-demo", "local", "RUNNING"]
    assert row[-2:] == ["bash", "--norc"]

    attached = ether(host, "term", "attach", terminal_id, stdin="echo $((6*7))\nexit 3\n")
    assert attached.returncode == 3, attached.stderr
    assert "42" in attached.stdout
    screen = ether(host, "term", "screen", terminal_id).stdout.splitlines()
    assert "42" in screen
    assert _terminal(host, terminal_id).state == terminal_pb2.TERMINAL_STATE_EXITED

    other = ether(host, "term", "new", "--", "sleep", "600").stdout.strip()
    pid = _terminal(host, other).pid
    assert ether(host, "term", "kill", other).returncode == 0
    assert other not in ether(host, "term", "ls").stdout
    assert not os.path.exists(f"/proc/{pid}"), "kill returned before the program ended"

    missing = ether(host, "term", "attach", "term-nope")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr


def test_attach_from_a_terminal_follows_its_size_and_ctrl_bracket_detaches(
    host: HostProcess,
) -> None:
    """From a real terminal: the remote terminal takes the window's size, keys are typed raw,
    and Ctrl-] detaches (exit 0) while the program keeps running."""
    terminal_id = ether(host, "term", "new", "--", "bash", "--norc").stdout.strip()
    wait_screen(host, terminal_id, "#")  # the prompt is on screen: the snapshot carries it
    # The client's own terminal: a pty of 30 rows and 100 columns.
    ours, its = pty.openpty()
    fcntl.ioctl(its, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    client = subprocess.Popen(
        [str(ETHER), "term", "attach", terminal_id],
        stdin=its,
        stdout=its,
        stderr=its,
        cwd=ROOT,
        env=os.environ | {"ETHER_ADDRESS": host.address},
        start_new_session=True,
    )
    os.close(its)
    seen = b""

    def until(text: bytes) -> None:
        nonlocal seen
        deadline = time.monotonic() + 20
        while text not in seen:
            left = deadline - time.monotonic()
            assert left > 0, seen[-400:]
            if select.select([ours], [], [], left)[0]:
                try:
                    seen += os.read(ours, 4096)
                except OSError:  # EIO: the client closed its side
                    break

    try:
        until(b"#")  # the prompt, repainted from the snapshot
        os.write(ours, b"stty size\r")
        until(b"30 100")
        os.write(ours, b"echo cli-$((40+2))\r")
        until(b"cli-42")
        os.write(ours, b"\x1d")
        until(b"detached from " + terminal_id.encode())
        assert client.wait(timeout=20) == 0
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        os.close(ours)
    terminal = _terminal(host, terminal_id)
    assert terminal.state == terminal_pb2.TERMINAL_STATE_RUNNING
    assert (terminal.rows, terminal.cols) == (30, 100)
    deadline = time.monotonic() + 10  # the host sees the detach when the stream's cancel lands
    while _terminal(host, terminal_id).attached_clients:
        assert time.monotonic() < deadline, "the detached client is still counted as attached"
    assert ether(host, "term", "kill", terminal_id).returncode == 0
