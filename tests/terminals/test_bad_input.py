"""Bad input gets a clear status, never a crash: unknown ids, bad regexes, odd sizes, writes to
exited programs, huge input, forbidden commands."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.terminals.conftest import start_host
from tests.terminals.support import (
    close,
    create,
    error_details,
    screen,
    seconds,
    wait_exit,
    wait_output,
    wait_screen,
    write,
)

CONFIG = """
[terminals]
max_terminals_per_owner = 8
forbid_commands = ["python3*", "/usr/bin/perl"]
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = start_host(tmp_path_factory.mktemp("terminals-bad") / "state", CONFIG)
    try:
        yield process
    finally:
        process.stop()


def code_of(call: object) -> tuple[grpc.StatusCode, str, dict[str, object]]:
    with pytest.raises(grpc.RpcError) as error:
        call()  # type: ignore[operator]
    return error.value.code(), error.value.details() or "", error_details(error.value)


def test_unknown_terminals_are_not_found_for_every_operation(host: HostProcess) -> None:
    """Every RPC naming a terminal that does not exist answers NOT_FOUND."""
    stub, missing = host.terminals, "term-0000000000000000"
    calls = [
        lambda: stub.GetTerminal(pb.GetTerminalRequest(terminal_id=missing), timeout=10),
        lambda: stub.CloseTerminal(pb.CloseTerminalRequest(terminal_id=missing), timeout=10),
        lambda: stub.WriteInput(
            pb.WriteInputRequest(terminal_id=missing, input=pb.TerminalInput(text="x")), timeout=10
        ),
        lambda: stub.ReadScreen(pb.ReadScreenRequest(terminal_id=missing), timeout=10),
        lambda: stub.Resize(pb.ResizeRequest(terminal_id=missing, rows=10), timeout=10),
        lambda: stub.SendSignal(
            pb.SendSignalRequest(terminal_id=missing, signal="INT"), timeout=10
        ),
        lambda: stub.WaitFor(
            pb.WaitForRequest(terminal_id=missing, exit=pb.ExitCondition()), timeout=10
        ),
        lambda: list(
            stub.Attach(
                iter([pb.AttachRequest(start=pb.AttachStart(terminal_id=missing))]), timeout=10
            )
        ),
    ]
    for call in calls:
        code, _, details = code_of(call)
        assert code == grpc.StatusCode.NOT_FOUND
        assert details["ErrorInfo"].reason == "TERMINAL_NOT_FOUND"  # type: ignore[attr-defined]


def test_a_regex_that_does_not_compile_names_its_position(host: HostProcess) -> None:
    """WaitFor with a broken regex is INVALID_ARGUMENT; the message and details give the position."""
    terminal = create(host, ["sleep", "600"])
    code, message, details = code_of(lambda: wait_screen(host, terminal.id, "ok (unclosed"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "at position 3" in message and details["ErrorInfo"].metadata["position"] == "3"  # type: ignore[attr-defined]
    assert details["BadRequest"].field_violations[0].field == "screen.regex"  # type: ignore[attr-defined]
    code, message, _ = code_of(lambda: wait_output(host, terminal.id, "[z-a]"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "position 1" in message
    close(host, terminal.id)


def test_sizes_of_zero_and_65535_are_defaulted_or_clamped_and_negative_ones_refused(
    host: HostProcess,
) -> None:
    """rows/cols 0 mean 24x80, 65535 is clamped to 1000; a negative size is INVALID_ARGUMENT."""
    terminal = create(host, ["sleep", "600"], rows=0, cols=0)
    assert (terminal.rows, terminal.cols) == (24, 80)
    close(host, terminal.id)
    terminal = create(host, command="stty size; sleep 600", rows=65535, cols=65535)
    assert (terminal.rows, terminal.cols) == (1000, 1000)
    assert wait_screen(host, terminal.id, "^1000 1000$").screen.rows == 1000
    resized = host.terminals.Resize(
        pb.ResizeRequest(terminal_id=terminal.id, rows=1, cols=1), timeout=10
    )
    assert (resized.rows, resized.cols) == (1, 1) and len(screen(host, terminal.id).lines) == 1
    code, _, _ = code_of(
        lambda: host.terminals.Resize(
            pb.ResizeRequest(terminal_id=terminal.id, rows=-3), timeout=10
        )
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    close(host, terminal.id)
    code, _, _ = code_of(lambda: create(host, ["sleep", "1"], cols=-1))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_writing_to_an_exited_program_is_a_failed_precondition_naming_the_exit(
    host: HostProcess,
) -> None:
    """Input, resizes and signals to a program that exited say so, with its exit status."""
    terminal = create(host, command="exit 9")
    wait_exit(host, terminal.id)
    code, message, details = code_of(lambda: write(host, terminal.id, "hello\r"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "exit code 9" in message
    assert details["ErrorInfo"].metadata["exit_code"] == "9"  # type: ignore[attr-defined]
    for call in (
        lambda: host.terminals.Resize(
            pb.ResizeRequest(terminal_id=terminal.id, rows=10), timeout=10
        ),
        lambda: host.terminals.SendSignal(
            pb.SendSignalRequest(terminal_id=terminal.id, signal="INT"), timeout=10
        ),
    ):
        assert code_of(call)[0] == grpc.StatusCode.FAILED_PRECONDITION
    close(host, terminal.id)


def test_ten_megabytes_of_input_in_one_call_are_queued_and_all_delivered(host: HostProcess) -> None:
    """A 10 MB paste is accepted in one call and fed in pieces; the host answers other calls
    meanwhile, and the program reads every byte."""
    size = 10 * 1024 * 1024
    terminal = create(
        host, command=f"stty raw -echo; echo ready; head -c {size} | wc -c; sleep 600"
    )
    wait_output(host, terminal.id, "ready", after=0)  # raw mode on: no line-length limit, no echo
    answer = write(host, terminal.id, data=b"x" * size)
    assert answer.bytes_queued == size and 0 < answer.bytes_pending <= size
    health = health_pb2_grpc.HealthStub(host.channel)
    assert (
        health.Check(health_pb2.HealthCheckRequest(), timeout=10).status
        == health_pb2.HealthCheckResponse.SERVING
    )
    assert host.terminals.GetTerminal(
        pb.GetTerminalRequest(terminal_id=terminal.id), timeout=10
    ).terminal.pid
    assert wait_output(host, terminal.id, rf"^{size}\b", after=0, timeout=120).match == str(size)
    close(host, terminal.id)


def test_input_beyond_the_queue_is_resource_exhausted_naming_the_terminal(
    host: HostProcess,
) -> None:
    """More than the 16 MiB input queue in one call is refused whole (INPUT_TOO_LARGE: no
    retry helps), with a QuotaFailure naming the terminal."""
    terminal = create(host, ["sleep", "600"])
    code, message, details = code_of(
        lambda: write(host, terminal.id, data=b"y" * (17 * 1024 * 1024))
    )
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "input queue" in message
    assert details["ErrorInfo"].reason == "INPUT_TOO_LARGE"  # type: ignore[attr-defined]
    subject = details["QuotaFailure"].violations[0].subject  # type: ignore[attr-defined]
    assert subject == f"terminal:{terminal.id}"
    close(host, terminal.id)


def test_bad_input_fields_are_invalid_argument(host: HostProcess) -> None:
    """Unknown signals, control letters, keys, repeat counts and empty input are INVALID_ARGUMENT."""
    terminal = create(host, ["sleep", "600"])
    bad = [
        lambda: host.terminals.SendSignal(
            pb.SendSignalRequest(terminal_id=terminal.id, signal="SIGNOPE"), timeout=10
        ),
        lambda: host.terminals.SendSignal(
            pb.SendSignalRequest(terminal_id=terminal.id, signal="999"), timeout=10
        ),
        lambda: write(host, terminal.id, ctrl="1"),
        lambda: write(host, terminal.id, key=pb.KEY_UNSPECIFIED),
        lambda: write(host, terminal.id, "x", repeat=1001),
        lambda: host.terminals.WriteInput(
            pb.WriteInputRequest(terminal_id=terminal.id), timeout=10
        ),
        lambda: host.terminals.WaitFor(pb.WaitForRequest(terminal_id=terminal.id), timeout=10),
        lambda: host.terminals.WaitFor(
            pb.WaitForRequest(
                terminal_id=terminal.id, quiet=pb.QuietCondition(duration=seconds(0.001))
            ),
            timeout=10,
        ),
    ]
    for call in bad:
        assert code_of(call)[0] == grpc.StatusCode.INVALID_ARGUMENT
    close(host, terminal.id)


def test_bad_create_requests_say_what_is_wrong(host: HostProcess, tmp_path: Path) -> None:
    """Empty argv, a relative cwd, a bad env name: INVALID_ARGUMENT; an unknown program: NOT_FOUND."""
    stub = host.terminals
    cases = [
        (pb.CreateTerminalRequest(argv=pb.Argv(), cwd="/tmp"), grpc.StatusCode.INVALID_ARGUMENT),
        (
            pb.CreateTerminalRequest(argv=pb.Argv(args=["sleep", "1"]), cwd="tmp"),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            pb.CreateTerminalRequest(argv=pb.Argv(args=["sleep"]), cwd=str(tmp_path / "nope")),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            pb.CreateTerminalRequest(
                argv=pb.Argv(args=["sleep", "1"]), env={"1BAD": "x"}, cwd="/tmp"
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            pb.CreateTerminalRequest(argv=pb.Argv(args=["no-such-program-here"]), cwd="/tmp"),
            grpc.StatusCode.NOT_FOUND,
        ),
        (
            pb.CreateTerminalRequest(
                argv=pb.Argv(args=["sleep", "1"]), cwd="/tmp", idle_timeout=seconds(-1)
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
    ]
    for request, expected in cases:
        assert (
            code_of(lambda request=request: stub.CreateTerminal(request, timeout=10))[0] == expected
        )


def test_forbidden_commands_are_refused_on_their_resolved_path(
    host: HostProcess, tmp_path: Path
) -> None:
    """A forbidden program is PERMISSION_DENIED naming the rule, whether asked by name, through a
    symlink with another name, or as the first word of a command line; substrings do not count."""
    alias = tmp_path / "innocent"
    alias.symlink_to(Path("/usr/bin/python3").resolve())
    for request in (
        pb.CreateTerminalRequest(
            argv=pb.Argv(args=["python3", "-c", "1"]), cwd="/tmp", env={"PATH": "/usr/bin:/bin"}
        ),
        pb.CreateTerminalRequest(argv=pb.Argv(args=[str(alias)]), cwd="/tmp"),
        pb.CreateTerminalRequest(
            command_line="python3 -c 1", cwd="/tmp", env={"PATH": "/usr/bin:/bin"}
        ),
    ):
        code, message, details = code_of(
            lambda request=request: host.terminals.CreateTerminal(request, timeout=10)
        )
        assert code == grpc.StatusCode.PERMISSION_DENIED and "'python3*'" in message
        assert details["ErrorInfo"].reason == "COMMAND_FORBIDDEN"  # type: ignore[attr-defined]
    allowed = create(host, command="echo python3 is only a word here")
    assert wait_exit(host, allowed.id).screen.lines[0] == "python3 is only a word here"
    close(host, allowed.id)


def test_the_environment_comes_from_the_allowlist_not_the_host(host: HostProcess) -> None:
    """A terminal sees allowlisted variables and its own, not the rest of the host's environment."""
    terminal = create(
        host, command="echo [$PYTHONUNBUFFERED] [$MINE] [$TERM]; env | wc -l", env={"MINE": "yes"}
    )
    lines = wait_exit(host, terminal.id).screen.lines
    assert lines[0] == "[] [yes] [xterm-256color]"
    assert int(lines[1]) < 20
    close(host, terminal.id)


def test_running_out_of_file_descriptors_is_resource_exhausted_and_leaks_nothing(
    tmp_path: Path,
) -> None:
    """A host whose descriptor limit cannot hold max_terminals warns at start; when the limit
    runs out while creating terminals it answers RESOURCE_EXHAUSTED naming the limit, and the
    failed attempts leave no descriptor or process behind, so closing one terminal makes room
    for the next."""
    config = tmp_path / "host.toml"
    config.write_text("[terminals]\nmax_terminals_per_owner = 100\nmax_terminals = 100\n")
    host = HostProcess(tmp_path / "state", "--config", str(config), max_open_files=128)
    try:
        host.wait_serving()
        warning = host.wait_for_log(lambda r: "descriptors_wanted" in r)
        assert (warning["descriptors_wanted"], warning["limit"]) == (600, 128)
        made: list[pb.Terminal] = []
        code, message, details = grpc.StatusCode.OK, "", {}
        while len(made) < 40:
            try:
                made.append(create(host, ["sleep", "600"]))
            except grpc.RpcError as error:
                code, message = error.code(), error.details() or ""
                details = error_details(error)
                break
        assert made and code == grpc.StatusCode.RESOURCE_EXHAUSTED, (len(made), code, message)
        assert "out of file descriptors" in message and "ulimit -n" in message
        assert details["ErrorInfo"].reason == "FILE_DESCRIPTORS_EXHAUSTED"
        open_before = len(os.listdir(f"/proc/{host.process.pid}/fd"))
        for _ in range(3):  # failed attempts cost nothing
            with pytest.raises(grpc.RpcError):
                create(host, ["sleep", "600"])
        assert len(os.listdir(f"/proc/{host.process.pid}/fd")) <= open_before
        close(host, made.pop().id)
        made.append(create(host, ["sleep", "600"]))  # the room one close made
        for terminal in made:
            close(host, terminal.id)
    finally:
        host.stop()
