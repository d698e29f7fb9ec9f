"""Claims of docs/terminals.md that no other test asserted, checked as a user sees them: the idle
timeout and what counts as activity, defaults and limits of a terminal's durations, waits that
end with the program, the regex size limit, Attach's half-close, the command policy, and the
terminals of a host's earlier run."""

from __future__ import annotations

import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.terminals.conftest import CONFIG, start_host
from tests.terminals.support import (
    close,
    create,
    error_details,
    run,
    seconds,
    shell,
    wait,
    wait_exit,
    wait_output,
    write,
)
from tests.terminals.test_attach import Client
from tests.terminals.test_leaks import closed_event
from tests.terminals.test_rights import ALL, TOKENS, as_

DAY = 86400


def get(host: HostProcess, terminal_id: str, **call: Any) -> pb.Terminal:
    call.setdefault("timeout", 30)
    request = pb.GetTerminalRequest(terminal_id=terminal_id)
    return host.terminals.GetTerminal(request, **call).terminal


def refusal(call: Any) -> tuple[grpc.StatusCode, str, dict[str, Any]]:
    """The status code, message and details (ErrorInfo, WaitForFailure...) of a failed call."""
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value.code(), raised.value.details() or "", error_details(raised.value)


def test_output_counts_as_activity_for_the_idle_timeout(host: HostProcess) -> None:
    """Doc: "closed after this long without input or output": a program printing every 0.1 s for
    5 s outlives an idle timeout of 2 s; once it falls silent the terminal is closed with the
    reason `idle_timeout`."""
    terminal = create(
        host,
        command="for i in $(seq 1 50); do echo tick $i; sleep 0.1; done; exec sleep 600",
        idle_timeout=seconds(2),
    )
    # Closed after 2 s, the program would be gone before its last tick: this wait would fail.
    wait_output(host, terminal.id, r"^tick 50$", after=0)
    assert closed_event(host, terminal.id).closed.reason == "idle_timeout"


def test_an_exited_programs_terminal_stays_readable_until_it_expires(host: HostProcess) -> None:
    """Doc: "A program that exits on its own leaves the terminal readable -- final screen, exit code
    or signal -- until it is closed or expires": the idle timeout still closes it."""
    terminal = create(host, command="echo done-$((6*7)); exit 5", idle_timeout=seconds(2))
    ended = wait_exit(host, terminal.id)
    assert ended.exit_status.code == 5 and ended.screen.lines[0] == "done-42"
    closed = closed_event(host, terminal.id)
    assert closed.closed.reason == "idle_timeout" and closed.terminal.exit_status.code == 5
    code, _, found = refusal(lambda: get(host, terminal.id))
    assert code == grpc.StatusCode.NOT_FOUND and found["ErrorInfo"].reason == "TERMINAL_NOT_FOUND"


def test_durations_and_scrollback_default_and_stop_at_their_limits(host: HostProcess) -> None:
    """The [terminals] defaults: idle_timeout 1800 s, lifetime 1 day, 1000 scrollback lines, an
    id of "term-" + 16 hex digits; "the request may ask up to the limit" (7 days, 30 days,
    100000 lines): asking for more gives the limit."""
    plain = create(host, ["sleep", "600"])
    assert re.fullmatch(r"term-[0-9a-f]{16}", plain.id)
    assert plain.idle_timeout.seconds == 1800 and plain.max_lifetime.seconds == DAY
    assert plain.scrollback_lines == 1000
    asked = create(host, ["sleep", "600"], idle_timeout=seconds(3 * DAY), max_lifetime=seconds(9))
    assert asked.idle_timeout.seconds == 3 * DAY and asked.max_lifetime.seconds == 9
    greedy = create(
        host,
        ["sleep", "600"],
        idle_timeout=seconds(8 * DAY),
        max_lifetime=seconds(31 * DAY),
        scrollback_lines=200_000,
    )
    assert greedy.idle_timeout.seconds == 7 * DAY and greedy.max_lifetime.seconds == 30 * DAY
    assert greedy.scrollback_lines == 100_000
    assert get(host, greedy.id).idle_timeout.seconds == 7 * DAY
    for terminal in (plain, asked, greedy):
        close(host, terminal.id)


def test_waits_on_output_or_quiet_fail_when_the_program_exits_first(host: HostProcess) -> None:
    """Doc: "one whose program exits first (for a screen, output or quiet condition) is
    FAILED_PRECONDITION; [it carries] an ether.v1.WaitForFailure ... with the last screen, the
    output offset and the exit status". A quiet duration is "10 ms to 1 h": 1 h is taken, more
    is INVALID_ARGUMENT."""
    terminal = create(host, command="read go; echo bye-$go; exit 6")
    conditions: list[dict[str, Any]] = [
        {"output": pb.OutputCondition(regex="never shown", after_offset=0)},
        {"quiet": pb.QuietCondition(duration=seconds(3600))},
    ]
    with ThreadPoolExecutor(len(conditions)) as pool:
        # The wait's own timeout (20 s) is far off: only the exit can end these waits early.
        waits = [
            pool.submit(refusal, lambda c=c: wait(host, terminal.id, 20, **c)) for c in conditions
        ]
        write(host, terminal.id, "now\r")
        failed = [future.result() for future in waits]
    total = get(host, terminal.id).output_offset
    for code, message, found in failed:
        assert code == grpc.StatusCode.FAILED_PRECONDITION, message
        failure = found["WaitForFailure"]
        assert failure.exit_status.code == 6 and "bye-now" in failure.screen.lines
        assert failure.output_offset == total
    too_long = pb.QuietCondition(duration=seconds(3601))
    code, message, _ = refusal(lambda: wait(host, terminal.id, 1, quiet=too_long))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "1 hour" in message
    close(host, terminal.id)


def test_a_pattern_is_at_most_4_kib_of_utf8(host: HostProcess) -> None:
    """Doc: "A pattern is at most 4 KiB (UTF-8), else INVALID_ARGUMENT with reason
    REGEX_TOO_LONG and ErrorInfo.metadata.limit": 2048 two-byte characters (4096 bytes) match,
    2049 (4098 bytes, though only 2049 characters) are refused."""
    text = "\u00e9" * 2048
    terminal = create(host, command='printf "%s" "$TEXT"; exec sleep 600', env={"TEXT": text})
    assert wait_output(host, terminal.id, text, after=0).match == text
    code, message, found = refusal(lambda: wait_output(host, terminal.id, text + "\u00e9", 0, 1))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, message
    assert found["ErrorInfo"].reason == "REGEX_TOO_LONG"
    assert found["ErrorInfo"].metadata["limit"] == "4096"
    close(host, terminal.id)


def test_closing_the_request_side_only_ends_input_and_cancelling_detaches(
    host: HostProcess,
) -> None:
    """Doc: "Closing the request side only ends input; cancelling the call detaches without
    affecting the terminal." A client whose request side ended still gets the output and the
    exit; a cancelled viewer leaves the terminal running and no longer attached."""
    terminal = shell(host)
    requests = [
        pb.AttachRequest(start=pb.AttachStart(terminal_id=terminal.id)),
        pb.AttachRequest(input=pb.TerminalInput(text="echo typed-$((2+3))\r")),
    ]  # a plain list: once sent, the client closes its side of the stream
    half_closed = host.terminals.Attach(iter(requests), timeout=60)
    viewer = Client(host, pb.AttachStart(terminal_id=terminal.id, read_only=True))
    assert viewer.next().started.read_only and viewer.next().snapshot
    wait_output(host, terminal.id, r"^typed-5", after=0)
    viewer.done()  # cancels the viewer's call
    run(host, terminal.id, "echo after-$((3+4))")  # the terminal runs on after both
    write(host, terminal.id, "exit 4\r")
    seen, screen, ending = b"", "", None
    for message in half_closed:  # ends OK: the iteration would raise on an error status
        kind = message.WhichOneof("kind")
        seen += message.output.data if kind == "output" else b""
        if kind == "snapshot":
            screen = "\n".join(line.rstrip() for line in message.snapshot.screen.lines)
        ending = message.exit.exit_status.code if kind == "exit" else ending
    # Its own input may be echoed before its snapshot is taken (the stream's requests are read
    # beside its start, and a loaded machine lets the shell answer first): then the snapshot,
    # which holds all output before its offset, shows it, and the output after does not.
    assert b"typed-5\r\n" in seen or "\ntyped-5" in f"\n{screen}", (seen, screen)
    assert b"after-7\r\n" in seen and ending == 4
    assert get(host, terminal.id).attached_clients == 0
    close(host, terminal.id)


POLICY = (
    CONFIG + 'allow_commands = ["/usr/bin/*", "/bin/*"]\nforbid_commands = ["sleep", "/bin/sh"]\n'
)


def test_forbid_wins_over_allow_and_refusals_name_the_rule_and_resolved_path(
    tmp_path: Path,
) -> None:
    """Doc: "forbid_commands wins over allow_commands"; "A refused command is PERMISSION_DENIED
    naming the rule and the resolved path"; a rule with a `/` matches "the found path and its
    real path"; "A command_line runs under /bin/sh -c: the policy is checked on /bin/sh"."""
    # Outside the allowed folders, but really /usr/bin/cat and /usr/bin/sleep.
    alias, snooze = tmp_path / "kitty", tmp_path / "snooze"
    alias.symlink_to(os.path.realpath(shutil.which("cat") or "/usr/bin/cat"))
    sleep = os.path.realpath(shutil.which("sleep") or "/usr/bin/sleep")
    snooze.symlink_to(sleep)
    tool = tmp_path / "tool"
    tool.write_text("#!/usr/bin/cat\n")
    tool.chmod(0o755)
    host = start_host(tmp_path / "state", POLICY)
    try:
        # Asked by another name: the message names the rule and the path it resolved to.
        code, message, found = refusal(lambda: create(host, [str(snooze), "600"]))
        assert code == grpc.StatusCode.PERMISSION_DENIED
        assert found["ErrorInfo"].reason == "COMMAND_FORBIDDEN"  # though /usr/bin/* allows it
        assert "'sleep'" in message and sleep in message
        code, message, found = refusal(lambda: create(host, [str(tool)]))
        assert code == grpc.StatusCode.PERMISSION_DENIED and str(tool) in message
        assert found["ErrorInfo"].reason == "COMMAND_NOT_ALLOWED" and "/usr/bin/*" in message
        code, message, found = refusal(lambda: create(host, command="echo hi"))
        assert code == grpc.StatusCode.PERMISSION_DENIED and "'/bin/sh'" in message
        assert found["ErrorInfo"].reason == "COMMAND_FORBIDDEN"
        allowed = create(host, [str(alias)])
        assert get(host, allowed.id).state == pb.TERMINAL_STATE_RUNNING
        close(host, allowed.id)
    finally:
        host.stop()


def test_former_terminals_are_not_listed_not_counted_and_hidden_from_others(
    tmp_path: Path,
) -> None:
    """After a restart, "Former terminals are not listed by ListTerminals or WatchTerminals and
    do not count against the limits; ... another identity's former terminal is
    TERMINAL_NOT_FOUND" (its owner still reads it)."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {TOKENS['alice']} {ALL}\nbob {TOKENS['bob']} {ALL}\n")
    config = CONFIG.replace("max_terminals_per_owner = 12", "max_terminals_per_owner = 2")
    args = ("--auth-tokens-file", str(tokens))

    def make(host: HostProcess, **fields: Any) -> pb.Terminal:
        request = pb.CreateTerminalRequest(cwd="/tmp", **fields)
        return host.terminals.CreateTerminal(request, **as_("alice")).terminal

    host = start_host(tmp_path / "state", config, *args)
    former = [make(host, command_line="exit 3"), make(host, argv=pb.Argv(args=["sleep", "600"]))]
    wait_request = pb.WaitForRequest(terminal_id=former[0].id, exit=pb.ExitCondition())
    host.terminals.WaitFor(wait_request, **as_("alice"))
    assert host.stop() == 0  # SIGTERM: the running one is closed (reason shutdown) and recorded

    host = start_host(tmp_path / "state", config, *args)
    try:
        watch = host.terminals.WatchTerminals(
            pb.WatchTerminalsRequest(include_existing=True), **as_("alice")
        )
        listed = host.terminals.ListTerminals(pb.ListTerminalsRequest(), **as_("alice"))
        assert list(listed.terminals) == []
        fresh = [make(host, argv=pb.Argv(args=["sleep", "600"])) for _ in range(2)]  # limit: 2
        seen = []
        for event in watch:
            seen.append(event.terminal.id)
            if event.terminal.id == fresh[-1].id:
                break
        watch.cancel()
        assert seen == [t.id for t in fresh]
        for terminal in former:
            assert get(host, terminal.id, **as_("alice")).state == pb.TERMINAL_STATE_CLOSED
            code, message, found = refusal(lambda t=terminal: get(host, t.id, **as_("bob")))
            assert code == grpc.StatusCode.NOT_FOUND and "restart" not in message
            assert found["ErrorInfo"].reason == "TERMINAL_NOT_FOUND"
    finally:
        host.stop()
