"""`ether term` as a user runs it against a real host: new, ls, screen and kill; attach from a
pipe (input in, output out, the program's exit status); and attach from a real terminal (raw
keys, the window's size, Ctrl-] to detach without ending the program)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import termios
import time

import pyte
import wcwidth

from ether.v1 import terminal_pb2
from ether_host.cli.repaint import LocalScreen
from tests.support.host import ETHER, ROOT, HostProcess
from tests.terminals.support import close, run, shell, wait_screen


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


class PtyClient:
    """``ether term attach`` run in a real terminal of ``rows`` x ``cols`` (a pty), as a user
    runs it; ``seen`` is everything it drew."""

    def __init__(self, host: HostProcess, terminal_id: str, rows: int, cols: int) -> None:
        self.ours, its = pty.openpty()
        fcntl.ioctl(its, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.process = subprocess.Popen(
            [str(ETHER), "term", "attach", terminal_id],
            stdin=its,
            stdout=its,
            stderr=its,
            cwd=ROOT,
            env=os.environ | {"ETHER_ADDRESS": host.address},
            start_new_session=True,
        )
        os.close(its)
        self.seen = b""

    def until(self, text: bytes) -> None:
        deadline = time.monotonic() + 20
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, self.seen[-400:]
            if select.select([self.ours], [], [], left)[0]:
                try:
                    self.seen += os.read(self.ours, 4096)
                except OSError:  # EIO: the client closed its side
                    break

    def type(self, keys: bytes) -> None:
        os.write(self.ours, keys)

    def detach(self) -> None:
        self.type(b"\x1d")  # Ctrl-]
        assert self.process.wait(timeout=20) == 0
        self.until(b"detached from ")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.ours)


def test_attach_from_a_terminal_follows_its_size_and_ctrl_bracket_detaches(
    host: HostProcess,
) -> None:
    """From a real terminal: the remote terminal takes the window's size, keys are typed raw,
    and Ctrl-] detaches (exit 0) while the program keeps running."""
    terminal_id = ether(host, "term", "new", "--", "bash", "--norc").stdout.strip()
    wait_screen(host, terminal_id, "#")  # the prompt is on screen: the snapshot carries it
    client = PtyClient(host, terminal_id, rows=30, cols=100)
    try:
        client.until(b"#")  # the prompt, repainted from the snapshot
        client.type(b"stty size\r")
        client.until(b"30 100")
        client.type(b"echo cli-$((40+2))\r")
        client.until(b"cli-42")
        client.detach()
    finally:
        client.close()
    terminal = _terminal(host, terminal_id)
    assert terminal.state == terminal_pb2.TERMINAL_STATE_RUNNING
    assert (terminal.rows, terminal.cols) == (30, 100)
    deadline = time.monotonic() + 10  # the host sees the detach when the stream's cancel lands
    while _terminal(host, terminal_id).attached_clients:
        assert time.monotonic() < deadline, "the detached client is still counted as attached"
    assert ether(host, "term", "kill", terminal_id).returncode == 0


def test_attach_repaints_colours_and_cursor_as_the_program_left_them(host: HostProcess) -> None:
    """What was on the screen before attaching comes back in its colours (a coloured status
    bar to the end of its line included) with the cursor hidden as the program hid it, and a
    detach leaves the user's terminal with default colours and a visible cursor."""
    terminal = shell(host)
    run(host, terminal.id, r"printf '\e[1;31mALERT\e[0m \e[44;97mSTATUS    \e[0m\n\e[?25l'")
    client = PtyClient(host, terminal.id, rows=terminal.rows, cols=terminal.cols)
    local = pyte.Screen(terminal.cols, terminal.rows)  # what the user's terminal shows
    stream = pyte.ByteStream(local)
    try:
        client.until(b"STATUS")
        client.until(b"\x1b[?25l")  # the repaint ends with the cursor's visibility
        stream.feed(client.seen)
        row = next(y for y in range(terminal.rows) if local.display[y].startswith("ALERT STATUS"))
        cells = local.buffer[row]
        assert (cells[0].fg, cells[0].bold) == ("red", True), "ALERT lost its colour"
        assert (cells[5].fg, cells[5].bg) == ("default", "default")
        assert {(cells[x].bg, cells[x].fg) for x in range(6, 16)} == {("blue", "brightwhite")}
        hidden_while_attached = local.cursor.hidden
        assert hidden_while_attached, "the repaint showed the cursor the program hid"
        drawn = len(client.seen)
        client.detach()
        stream.feed(client.seen[drawn:])
        assert not local.cursor.hidden, "the detach left the user's cursor hidden"
    finally:
        client.close()
    close(host, terminal.id)


def test_a_detach_from_a_full_screen_program_gives_the_user_their_screen_back(
    host: HostProcess,
) -> None:
    """A program that switched to the alternate screen (vim, less, htop) switched the user's
    terminal too; detaching while it runs switches it back, and attaching to it while it runs
    switches to the alternate screen before the repaint, so the next detach can leave it."""
    enter, leave = b"\x1b[?1049h", b"\x1b[?1049l"
    terminal = shell(host)
    client = PtyClient(host, terminal.id, rows=terminal.rows, cols=terminal.cols)
    try:
        client.until(b"ether$")
        client.type(b"printf '\\e[?1049hFULL-%s\\n' SCREEN; cat\r")
        client.until(b"FULL-SCREEN")
        assert enter in client.seen  # the program's own switch, passed through
        entered = client.seen.rindex(enter)
        client.detach()
        assert leave in client.seen[entered:], "the detach left the user on the alternate screen"
    finally:
        client.close()
    again = PtyClient(host, terminal.id, rows=terminal.rows, cols=terminal.cols)
    try:
        again.until(b"FULL-SCREEN")  # the repaint of the alternate screen
        assert again.seen.index(enter) < again.seen.index(b"FULL-SCREEN")
        again.detach()
        assert leave in again.seen[again.seen.index(b"FULL-SCREEN") :]
    finally:
        again.close()
    close(host, terminal.id)


def test_ls_lines_up_wide_and_combining_names_and_prints_json(host: HostProcess) -> None:
    """ls pads by terminal cells, not code points: with names in CJK (two cells a character) and
    with a combining accent (none), every column starts at the same cell on every row. -o json
    prints the terminals as a JSON array."""
    names = ["終端機", "cafe\u0301", "plain"]
    ids = []
    for name in names:
        created = ether(host, "term", "new", "--name", name, "--", "sleep", "600")
        assert created.returncode == 0, created.stderr
        ids.append(created.stdout.strip())
    try:
        listed = ether(host, "term", "ls")
        assert listed.returncode == 0, listed.stderr
        lines = [line for line in listed.stdout.splitlines() if line.startswith(tuple(ids))]
        lines.insert(0, listed.stdout.splitlines()[0])
        # The cell where OWNER ("local" in our rows) and COMMAND ("sleep 600") start.
        owners = {wcwidth.wcswidth(line[: line.index(" local ") + 1]) for line in lines[1:]}
        owners.add(wcwidth.wcswidth(lines[0][: lines[0].index("OWNER")]))
        commands = {wcwidth.wcswidth(line[: line.index("sleep 600")]) for line in lines[1:]}
        commands.add(wcwidth.wcswidth(lines[0][: lines[0].index("COMMAND")]))
        assert len(lines) == 4 and len(owners) == 1 and len(commands) == 1, listed.stdout

        as_json = ether(host, "term", "ls", "-o", "json")
        assert as_json.returncode == 0, as_json.stderr
        found = {t["id"]: t for t in json.loads(as_json.stdout)}
        assert [found[i]["name"] for i in ids] == names
        assert found[ids[0]]["argv"] == ["sleep", "600"]
        assert found[ids[0]]["state"] == "TERMINAL_STATE_RUNNING"
    finally:
        for terminal_id in ids:
            ether(host, "term", "kill", terminal_id)


def test_a_screen_switch_split_across_output_chunks_is_still_followed() -> None:
    """Output arrives in chunks of any size: a switch cut in two still counts, so the detach
    that follows still leaves the alternate screen."""
    local = LocalScreen()
    local.saw(b"drawing\x1b[?10")
    local.saw(b"49hmore")
    assert local.alternate
    assert local.restore().startswith(b"\x1b[?1049l")
    local.saw(b"\x1b[?1049h\x1b[")
    local.saw(b"?1049l")
    assert not local.alternate
