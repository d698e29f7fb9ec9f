"""Terminals through a real host: programs on PTYs, their screens, input, waits and events."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.support.procs import wait_gone
from tests.terminals.conftest import start_host
from tests.terminals.support import (
    close,
    create,
    error_details,
    processes_of,
    run,
    screen,
    seconds,
    shell,
    wait,
    wait_exit,
    wait_output,
    wait_quiet,
    wait_screen,
    write,
)


def test_a_shell_runs_a_command_and_the_screen_shows_it(host: HostProcess) -> None:
    """Typing a command into bash shows the command and its output on the screen, as a person sees it."""
    terminal = shell(host)
    run(host, terminal.id, "echo hello; printf 'a\\tb\\n'")
    view = screen(host, terminal.id)
    assert view.lines[:4] == [
        "ether$ echo hello; printf 'a\\tb\\n'",
        "hello",
        "a       b",
        "ether$",
    ]
    assert (view.cursor.row, view.cursor.col, view.cursor.visible) == (3, 7, True)
    assert (view.rows, view.cols) == (24, 80) and len(view.lines) == 24
    close(host, terminal.id)


def test_an_exited_program_stays_readable_with_its_exit_code(host: HostProcess) -> None:
    """A program that exits on its own leaves its final screen and exit code readable until closed."""
    terminal = create(host, command="echo finished; exit 3")
    result = wait_exit(host, terminal.id)
    assert result.exit_status.code == 3 and result.exit_status.signal == 0
    info = host.terminals.GetTerminal(
        pb.GetTerminalRequest(terminal_id=terminal.id), timeout=10
    ).terminal
    assert info.state == pb.TERMINAL_STATE_EXITED and info.exit_status.code == 3
    view = screen(host, terminal.id)
    assert view.lines[0] == "finished" and view.exited and view.exit_status.code == 3
    closed = close(host, terminal.id)
    assert closed.state == pb.TERMINAL_STATE_CLOSED and closed.exit_status.code == 3
    with pytest.raises(grpc.RpcError) as error:
        screen(host, terminal.id)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_signal_reaches_the_process_group_and_is_reported(host: HostProcess) -> None:
    """SendSignal kills the program; the exit status names the signal."""
    terminal = create(host, ["sleep", "600"])
    sent = host.terminals.SendSignal(
        pb.SendSignalRequest(terminal_id=terminal.id, signal="term"), timeout=10
    )
    assert sent.signal == 15 and sent.process_group == terminal.pid
    result = wait_exit(host, terminal.id)
    assert not result.exit_status.HasField("code")
    assert (result.exit_status.signal, result.exit_status.signal_name) == (15, "SIGTERM")
    close(host, terminal.id)


def test_ctrl_c_interrupts_the_foreground_job_not_the_shell(host: HostProcess) -> None:
    """Ctrl-C typed into bash stops the running command and brings the prompt back."""
    terminal = shell(host)
    write(
        host,
        terminal.id,
        "python3 -c 'import time; print(\"sleeping\", flush=True); time.sleep(600)'\r",
    )
    wait_output(host, terminal.id, "^sleeping", after=0)
    offset = host.terminals.GetTerminal(
        pb.GetTerminalRequest(terminal_id=terminal.id), timeout=10
    ).terminal.output_offset
    write(host, terminal.id, ctrl="c")
    interrupted = wait_output(
        host, terminal.id, r"\^C[\s\S]*KeyboardInterrupt\n[\s\S]*ether\$", after=offset
    )
    assert interrupted.screen.lines[interrupted.screen.cursor.row] == "ether$"
    assert host.terminals.GetTerminal(
        pb.GetTerminalRequest(terminal_id=terminal.id), timeout=10
    ).terminal.state == (pb.TERMINAL_STATE_RUNNING)
    close(host, terminal.id)


def test_ctrl_c_jumps_the_input_queued_for_a_program_that_does_not_read(
    host: HostProcess,
) -> None:
    """Ctrl-C typed behind a megabyte of input that the program reads a few bytes at a time
    (hours of it) interrupts the program at once; the unread input is dropped, as the terminal
    itself drops it on the signal."""
    slow_reader = "import os, time\nwhile os.read(0, 64): time.sleep(0.01)"
    terminal = create(
        host, command=f"stty -icanon -echo; echo ready; exec python3 -c '{slow_reader}'"
    )
    wait_output(host, terminal.id, "ready", after=0)
    pasted = write(host, terminal.id, data=b"x" * (1024 * 1024))
    assert pasted.bytes_pending > 0  # the PTY is full: the rest waits in the host's queue
    interrupt = write(host, terminal.id, ctrl="c")
    assert 0 < interrupt.bytes_discarded <= pasted.bytes_pending
    assert interrupt.bytes_queued == 1 and interrupt.bytes_pending <= 1
    assert wait_exit(host, terminal.id).exit_status.signal_name == "SIGINT"
    close(host, terminal.id)


def test_ctrl_c_is_a_plain_byte_in_order_for_a_raw_mode_program(host: HostProcess) -> None:
    """With ISIG off (raw mode, as in vim) Ctrl-C signals nothing: it is queued after the
    pending input like any byte, and the program reads all of it, in order."""
    size = 1024 * 1024
    terminal = create(
        host,
        command="stty raw -echo; trap 'go=1' USR1; echo ready; "
        'while [ -z "$go" ]; do sleep 0.05; done; '
        f"head -c {size + 1} | tail -c 1 | od -An -c; exec sleep 600",
    )
    wait_output(host, terminal.id, "ready", after=0)
    pasted = write(host, terminal.id, data=b"x" * size)
    assert pasted.bytes_pending > 0
    interrupt = write(host, terminal.id, ctrl="c")
    assert interrupt.bytes_discarded == 0 and interrupt.bytes_pending > 1
    host.terminals.SendSignal(pb.SendSignalRequest(terminal_id=terminal.id, signal="USR1"))
    assert wait_output(host, terminal.id, r"\b003\b", after=0).match == "003"
    close(host, terminal.id)


QUERIES = r"""
import os, tty
tty.setraw(0)
def ask(query, last):
    os.write(1, query)
    reply = b""
    while not reply.endswith(last):
        reply += os.read(0, 1)
    return reply.replace(b"\x1b", b"ESC").decode()
cursor = ask(b"\x1b[2J\x1b[5;10H\x1b[6n", b"R")
found = [cursor, ask(b"\x1b[c", b"c"), ask(b"\x1b[>c", b"c"), ask(b"\x1b[5n", b"n")]
os.write(1, ("\x1b[H" + " ".join(found) + " done").encode())
"""


def test_terminal_queries_are_answered_as_a_terminal_would(
    host: HostProcess, tmp_path: Path
) -> None:
    """A program that asks where the cursor is (DSR 6), what terminal this is (DA1, DA2) and
    whether it is well (DSR 5) gets the answers a terminal sends, on its input."""
    program = tmp_path / "queries.py"
    program.write_text(QUERIES)
    terminal = create(host, ["python3", str(program)])
    answers = wait_screen(host, terminal.id, r"done").screen.lines[0].split()
    assert answers == ["ESC[5;10R", "ESC[?1;2c", "ESC[>84;0;0c", "ESC[0n", "done"]
    close(host, terminal.id)


def test_named_keys_follow_the_programs_cursor_key_mode(host: HostProcess) -> None:
    """Arrow keys are sent as CSI normally and as SS3 once the program enables application cursor keys."""
    terminal = create(host, command="stty -echo; od -An -c")
    wait_quiet(host, terminal.id, 0.2)
    write(host, terminal.id, key=pb.KEY_UP)
    write(host, terminal.id, key=pb.KEY_F5)
    write(host, terminal.id, ctrl="d", repeat=2)
    text = " ".join(" ".join(wait_exit(host, terminal.id).screen.lines).split())
    assert "033 [ A 033 [ 1 5 ~" in text
    close(host, terminal.id)

    terminal = create(host, command="printf '\\033[?1h'; stty -echo; od -An -c")
    wait_quiet(host, terminal.id, 0.2)
    write(host, terminal.id, key=pb.KEY_UP)
    write(host, terminal.id, key=pb.KEY_LEFT, alt=True)
    write(host, terminal.id, ctrl="d", repeat=2)
    text = " ".join(" ".join(wait_exit(host, terminal.id).screen.lines).split())
    assert "033 O A 033 033 O D" in text
    close(host, terminal.id)


def test_a_paste_is_bracketed_when_the_program_asks_for_it(host: HostProcess) -> None:
    """With bracketed paste on, a paste arrives wrapped in paste brackets; plain text is not."""
    terminal = create(host, command="printf '\\033[?2004h'; stty -echo; od -An -c")
    wait_quiet(host, terminal.id, 0.2)
    write(host, terminal.id, "hi", paste=True)
    write(host, terminal.id, ctrl="d", repeat=2)
    text = " ".join(" ".join(wait_exit(host, terminal.id).screen.lines).split())
    assert "033 [ 2 0 0 ~ h i 033 [ 2 0 1 ~" in text
    close(host, terminal.id)


def test_resize_is_clamped_and_the_program_sees_the_new_size(host: HostProcess) -> None:
    """Resize applies sane bounds, and the program learns the size (SIGWINCH) as `stty size` shows."""
    terminal = shell(host)
    resized = host.terminals.Resize(
        pb.ResizeRequest(terminal_id=terminal.id, rows=65535, cols=0), timeout=10
    )
    assert (resized.rows, resized.cols) == (1000, 80)
    resized = host.terminals.Resize(
        pb.ResizeRequest(terminal_id=terminal.id, rows=30, cols=100), timeout=10
    )
    assert (resized.rows, resized.cols) == (30, 100)
    run(host, terminal.id, "stty size")
    view = screen(host, terminal.id)
    assert (view.rows, view.cols) == (30, 100) and "30 100" in view.lines
    close(host, terminal.id)


def test_scrollback_keeps_the_lines_that_scrolled_off(host: HostProcess) -> None:
    """Output longer than the screen: the visible lines are the last ones, the rest is scrollback text."""
    terminal = create(host, command="seq 1 200; sleep 600", rows=10, scrollback_lines=50)
    wait_screen(host, terminal.id, r"^200$")
    view = screen(host, terminal.id, include_scrollback=True)
    assert view.lines == [str(n) for n in range(192, 201)] + [""]
    assert view.scrollback == [str(n) for n in range(142, 192)]
    assert list(
        screen(host, terminal.id, include_scrollback=True, scrollback_limit=3).scrollback
    ) == ["189", "190", "191"]
    close(host, terminal.id)


def test_structured_screen_has_title_styles_and_the_alternate_screen(host: HostProcess) -> None:
    """STRUCTURED shows the title, coloured runs, the cursor and whether the alternate screen is on."""
    terminal = shell(host)
    run(host, terminal.id, "printf '\\033]2;build 42\\007\\033[1;31mred\\033[0m plain\\n'")
    view = screen(host, terminal.id, include_styles=True)
    assert view.title == "build 42" and not view.alternate_screen
    runs = view.styled_lines[1].runs
    assert [(r.text, r.fg, r.bold) for r in runs] == [("red", "red", True), (" plain", "", False)]
    # The text comes from the long-running program itself: once it shows, Ctrl-C reaches it.
    write(
        host,
        terminal.id,
        'python3 -c \'import time; print("\\033[?1049h\\033[Hfull screen", end="", '
        "flush=True); time.sleep(600)'\r",
    )
    result = wait_screen(host, terminal.id, "^full screen$")
    assert result.screen.alternate_screen and result.screen.lines[1:] == [""] * 23
    write(host, terminal.id, ctrl="c")
    write(host, terminal.id, "printf '\\033[?1049l'\r")
    result = wait_screen(host, terminal.id, r"^red plain$")  # only on the primary screen
    assert not result.screen.alternate_screen
    # The command line wrapped onto two rows; the new prompt sits where the cursor was saved.
    assert result.screen.lines[3].endswith("time.sleep(600)'")
    assert result.screen.lines[4] == "ether$"
    close(host, terminal.id)


def test_wait_for_output_reports_offsets_to_continue_from(host: HostProcess) -> None:
    """An output match gives its text, groups and offsets; the end offset finds the next match."""
    terminal = create(host, command="for i in 1 2 3; do echo item $i; done; sleep 600")
    first = wait_output(host, terminal.id, r"item (\d)", after=0)
    assert (first.match, list(first.groups)) == ("item 1", ["1"])
    assert first.match_end_offset - first.match_start_offset == len("item 1")
    second = wait_output(host, terminal.id, r"item (\d)", after=first.match_end_offset)
    assert list(second.groups) == ["2"] and second.match_start_offset > first.match_start_offset
    raw = wait(
        host, terminal.id, output=pb.OutputCondition(regex=r"item 3\r\n", after_offset=0, raw=True)
    )
    assert raw.match == "item 3\r\n"
    close(host, terminal.id)


def test_wait_for_quiet_returns_once_output_stops(host: HostProcess) -> None:
    """A quiet condition returns after the program stops printing for the given time."""
    terminal = create(
        host, command="for i in 1 2 3 4 5; do echo tick $i; sleep 0.05; done; sleep 600"
    )
    result = wait_quiet(host, terminal.id, 0.5)
    assert "tick 5" in result.screen.lines
    assert result.waited.ToTimedelta().total_seconds() >= 0.5
    close(host, terminal.id)


def test_wait_for_timeout_carries_the_current_screen(host: HostProcess) -> None:
    """A wait that times out is DEADLINE_EXCEEDED with the screen it last saw in the details."""
    terminal = shell(host)
    with pytest.raises(grpc.RpcError) as error:
        wait_screen(host, terminal.id, "never shown", timeout=0.3)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    failure = error_details(error.value)["WaitForFailure"]
    assert failure.screen.lines[0] == "ether$" and failure.screen.cursor.col == 7
    assert failure.waited.ToTimedelta().total_seconds() >= 0.3
    close(host, terminal.id)


def test_wait_for_a_pattern_fails_when_the_program_exits_first(host: HostProcess) -> None:
    """Waiting for text that never comes ends with FAILED_PRECONDITION and the final screen once it exits."""
    terminal = create(host, command="echo bye; exit 4")
    with pytest.raises(grpc.RpcError) as error:
        wait_screen(host, terminal.id, "never shown")
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    failure = error_details(error.value)["WaitForFailure"]
    assert failure.exit_status.code == 4 and failure.screen.lines[0] == "bye"
    close(host, terminal.id)


def test_the_grpc_deadline_still_yields_the_screen(host: HostProcess) -> None:
    """With a client deadline shorter than the wait, the host answers first, with the screen."""
    terminal = shell(host)
    request = pb.WaitForRequest(
        terminal_id=terminal.id, screen=pb.ScreenCondition(regex="never"), timeout=seconds(60)
    )
    with pytest.raises(grpc.RpcError) as error:
        host.terminals.WaitFor(request, timeout=1.0)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert error_details(error.value)["WaitForFailure"].screen.lines[0] == "ether$"
    close(host, terminal.id)


def test_list_is_paginated_oldest_first_and_filters_by_state(host: HostProcess) -> None:
    """ListTerminals pages through the caller's terminals in creation order and filters by state."""
    made = [create(host, ["sleep", "600"], name=f"list-{n}") for n in range(3)]
    done = create(host, command="true", name="list-done")
    wait_exit(host, done.id)
    names, token, pages = [], "", 0
    while True:
        request = pb.ListTerminalsRequest(page_size=2, page_token=token)
        page = host.terminals.ListTerminals(request, timeout=10)
        assert len(page.terminals) <= 2
        names += [t.name for t in page.terminals if t.name.startswith("list-")]
        pages, token = pages + 1, page.next_page_token
        if not token:
            break
    assert pages >= 2
    assert names == ["list-0", "list-1", "list-2", "list-done"]
    exited = host.terminals.ListTerminals(
        pb.ListTerminalsRequest(state=pb.TERMINAL_STATE_EXITED), timeout=10
    )
    assert "list-done" in [t.name for t in exited.terminals] and "list-0" not in [
        t.name for t in exited.terminals
    ]
    for terminal in [*made, done]:
        close(host, terminal.id)


def test_a_repeated_request_id_returns_the_same_terminal(host: HostProcess) -> None:
    """CreateTerminal with a request_id is idempotent: the retry gets the first terminal."""
    first = create(host, ["sleep", "600"], request_id="4b1f7c52-5f3e-4c1b-9d8e-2a7f0c9e1d11")
    again = create(host, ["sleep", "600"], request_id="4b1f7c52-5f3e-4c1b-9d8e-2a7f0c9e1d11")
    assert again.id == first.id and again.pid == first.pid
    close(host, first.id)


def test_watch_reports_created_exited_and_closed(host: HostProcess) -> None:
    """WatchTerminals streams a terminal's creation, its program's exit and its closing, with the reason."""
    stream = host.terminals.WatchTerminals(pb.WatchTerminalsRequest(), timeout=60)
    terminal = create(host, command="exit 2")
    events = []
    for event in stream:
        if event.terminal.id != terminal.id:
            continue
        events.append(event)
        kind = event.WhichOneof("event")
        if kind == "exited":
            close(host, terminal.id)
        if kind == "closed":
            break
    stream.cancel()
    assert [e.WhichOneof("event") for e in events] == ["created", "exited", "closed"]
    assert events[1].exited.exit_status.code == 2
    assert (
        events[2].closed.reason == "closed" and events[2].terminal.state == pb.TERMINAL_STATE_CLOSED
    )


def test_limits_per_owner_are_resource_exhausted_with_quota_details(host: HostProcess) -> None:
    """Past the per-owner limit, CreateTerminal is RESOURCE_EXHAUSTED with a QuotaFailure."""
    listed = host.terminals.ListTerminals(pb.ListTerminalsRequest(), timeout=10).terminals
    made = [create(host, ["sleep", "600"]) for _ in range(12 - len(listed))]
    with pytest.raises(grpc.RpcError) as error:
        create(host, ["sleep", "600"])
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    found = error_details(error.value)
    assert found["ErrorInfo"].reason == "TERMINAL_OWNER_LIMIT"
    assert found["QuotaFailure"].violations[0].subject == "owner:local"
    for terminal in made:
        close(host, terminal.id)
    close(host, create(host, ["sleep", "600"]).id)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_flood_nobody_reads_keeps_memory_bounded(host: HostProcess) -> None:
    """144 MB of output with no reader: the host keeps only a bounded window (its memory grows
    far less than the flood), and the screen read afterwards shows the last lines exactly."""
    before = _rss_kib(host.process.pid)
    terminal = create(
        host, command="yes 'a line of flood output' | head -n 6000000; echo end", rows=5
    )
    result = wait_exit(host, terminal.id, timeout=120)
    info = host.terminals.GetTerminal(
        pb.GetTerminalRequest(terminal_id=terminal.id), timeout=10
    ).terminal
    assert info.output_offset > 140_000_000
    assert info.output_offset - info.retained_offset <= 2_621_440  # the 2 MiB window (+ 1/4 slack)
    assert result.screen.lines == ["a line of flood output"] * 3 + ["end", ""]
    assert _rss_kib(host.process.pid) - before < 40 * 1024
    close(host, terminal.id)


def test_a_signal_reaches_every_process_of_the_group(host: HostProcess) -> None:
    """SendSignal signals the terminal's whole process group: the program's children die with
    it instead of being left behind."""
    terminal = create(host, command="sleep 600 & sleep 600 & echo forked; wait")
    wait_output(host, terminal.id, "forked", after=0)
    members = [pid for pid in processes_of(terminal.id, pumps=False) if pid != terminal.pid]
    assert len(members) == 2, members  # the two sleeps
    host.terminals.SendSignal(
        pb.SendSignalRequest(terminal_id=terminal.id, signal="term"), timeout=10
    )
    wait_exit(host, terminal.id)
    exited = host.terminals.GetTerminal(pb.GetTerminalRequest(terminal_id=terminal.id)).terminal
    assert exited.exit_status.signal == 15
    assert wait_gone(members, within=10) == []
    close(host, terminal.id)


def test_the_host_wide_limit_and_the_allow_list(tmp_path: Path) -> None:
    """terminals.max_terminals caps terminals across owners (RESOURCE_EXHAUSTED, TERMINAL_LIMIT,
    a quota violation on the host), and with allow_commands only matching programs start:
    anything else is PERMISSION_DENIED naming the rules."""
    config = (
        "[terminals]\nmax_terminals = 2\nmax_terminals_per_owner = 12\nclose_grace = 1.0\n"
        'allow_commands = ["/usr/bin/sleep", "/bin/sleep"]\n'
    )
    limited = start_host(tmp_path / "state", config)
    try:
        made = [create(limited, ["sleep", "600"]) for _ in range(2)]
        with pytest.raises(grpc.RpcError) as error:
            create(limited, ["sleep", "600"])
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        found = error_details(error.value)
        assert found["ErrorInfo"].reason == "TERMINAL_LIMIT"
        assert found["QuotaFailure"].violations[0].subject == "host"
        close(limited, made.pop().id)
        with pytest.raises(grpc.RpcError) as error:
            create(limited, ["cat"])
        assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error_details(error.value)["ErrorInfo"].reason == "COMMAND_NOT_ALLOWED"
        assert "allow_commands" in (error.value.details() or "")
        close(limited, create(limited, ["sleep", "600"]).id)
        close(limited, made.pop().id)
    finally:
        limited.stop()


@pytest.mark.parametrize("mode", ["47", "1047"])
def test_the_older_alternate_screen_modes_and_a_hidden_cursor(host: HostProcess, mode: str) -> None:
    """Modes 47 and 1047 switch to the alternate screen and back like 1049 does, and a hidden
    cursor (?25l) shows as not visible until it is shown again."""
    terminal = shell(host)
    write(
        host,
        terminal.id,
        f'python3 -c \'import time; print("\\033[?{mode}h\\033[?25l\\033[Halternate", end="", '
        "flush=True); time.sleep(600)'\r",
    )
    result = wait_screen(host, terminal.id, "^alternate$")
    assert result.screen.alternate_screen and not result.screen.cursor.visible
    write(host, terminal.id, ctrl="c")
    write(host, terminal.id, f"printf '\\033[?{mode}l\\033[?25h'; echo back\r")
    result = wait_screen(host, terminal.id, r"^back$")
    assert not result.screen.alternate_screen and result.screen.cursor.visible
    assert "alternate" not in result.screen.lines
    close(host, terminal.id)
