"""Terminal recording: a terminal's output as an asciicast v2 file, downloaded with GetRecording.

A real host, real bash terminals, a real gRPC client. Each cast is read back in small pieces (as
a client downloading a large one would) and parsed line by line as asciicast v2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.terminals.conftest import start_host
from tests.terminals.support import (
    SHELL,
    SHELL_ENV,
    close,
    create,
    error_details,
    run,
    shell,
    wait_exit,
    wait_output,
)

LIMIT = 64 * 1024
CONFIG = f"""
[terminals]
close_grace = 1.0
recording_limit = {LIMIT}
"""
TOKENS = {
    "scribe": "scribe-token-012345678",  # may write (record) but not read (download)
    "viewer": "viewer-token-012345678",  # may read (download) but not write (record)
}


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = start_host(tmp_path_factory.mktemp("recording") / "state", CONFIG)
    try:
        yield process
    finally:
        process.stop()


def download(
    host: HostProcess, terminal_id: str, piece: int = 700, **call: Any
) -> tuple[bytes, pb.Recording]:
    """The whole cast, in pieces of ``piece`` bytes, and the recording's state at the end."""
    call.setdefault("timeout", 30)
    data = b""
    while True:
        request = pb.GetRecordingRequest(terminal_id=terminal_id, offset=len(data), max_bytes=piece)
        answer = host.terminals.GetRecording(request, **call)
        assert answer.offset == len(data)
        if not answer.data:
            return data, answer.recording
        data += answer.data


def parse(cast: bytes) -> tuple[dict[str, Any], list[list[Any]]]:
    """The header and events of an asciicast v2 file (every line must be JSON)."""
    lines = cast.decode("utf-8").splitlines()
    header = json.loads(lines[0])
    events = [json.loads(line) for line in lines[1:]]
    for event in events:
        assert len(event) == 3 and isinstance(event[0], float | int) and event[1] in ("o", "r")
        assert isinstance(event[2], str)
    return header, events


def output_of(events: list[list[Any]]) -> str:
    return "".join(text for _, kind, text in events if kind == "o")


def set_recording(host: HostProcess, terminal_id: str, record: bool, **call: Any) -> pb.Recording:
    call.setdefault("timeout", 30)
    request = pb.SetRecordingRequest(terminal_id=terminal_id, record=record)
    return host.terminals.SetRecording(request, **call).recording


def refusal(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as error:
        call()
    return error.value


def test_a_recorded_terminal_downloads_as_asciicast_v2(host: HostProcess) -> None:
    """Created with record: the header has the terminal's size, the output events hold what the
    shell printed (the typed command's echo and its answer), times never go back, a resize is an
    "r" event; closing the terminal deletes the cast."""
    terminal = shell(host, rows=30, cols=100, record=True)
    run(host, terminal.id, "echo rec-$((6*7))")
    host.terminals.Resize(pb.ResizeRequest(terminal_id=terminal.id, rows=40, cols=120), timeout=30)
    run(host, terminal.id, "sleep 0.1; echo second-line")

    cast, recording = download(host, terminal.id)
    header, events = parse(cast)
    assert header["version"] == 2
    assert (header["width"], header["height"]) == (100, 30)
    assert header["env"]["TERM"] == "xterm-256color"
    assert isinstance(header["timestamp"], int)
    text = output_of(events)
    assert "echo rec-$((6*7))" in text  # the echo of what was typed
    assert "rec-42\r\n" in text  # the shell's answer
    assert "second-line" in text
    assert ["r", "120x40"] in [event[1:] for event in events]
    times = [event[0] for event in events]
    assert times == sorted(times) and times[-1] > times[0]
    assert recording.active and recording.size == len(cast) and recording.limit == LIMIT
    far = pb.GetRecordingRequest(terminal_id=terminal.id, offset=2**62)  # past the end: nothing
    assert host.terminals.GetRecording(far, timeout=30).data == b""

    file = Path(host.state_dir) / "terminals" / "recordings" / f"{terminal.id}.cast"
    assert file.exists()
    close(host, terminal.id)
    assert not file.exists()
    error = refusal(lambda: download(host, terminal.id))
    assert error.code() == grpc.StatusCode.NOT_FOUND


def test_a_recording_started_and_stopped_later_holds_only_what_came_between(
    host: HostProcess,
) -> None:
    terminal = shell(host, rows=24, cols=80)
    error = refusal(lambda: download(host, terminal.id))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_details(error)["ErrorInfo"].reason == "NO_RECORDING"
    assert "SetRecording" in (error.details() or "")

    run(host, terminal.id, "echo before-$((1+1))")
    host.terminals.Resize(pb.ResizeRequest(terminal_id=terminal.id, rows=20, cols=90), timeout=30)
    started = set_recording(host, terminal.id, True)
    assert started.active and started.size > 0  # the header is written at once
    assert set_recording(host, terminal.id, True).started_at == started.started_at  # no restart
    run(host, terminal.id, "echo during-$((2+2))")
    stopped = set_recording(host, terminal.id, False)
    assert not stopped.active and stopped.stopped_reason == "stopped"
    run(host, terminal.id, "echo after-$((3+3))")

    cast, recording = download(host, terminal.id)
    header, events = parse(cast)
    assert (header["width"], header["height"]) == (90, 20)  # the size when recording started
    text = output_of(events)
    assert "during-4" in text
    assert "before-2" not in text and "after-6" not in text
    assert recording.size == len(cast) == stopped.size
    close(host, terminal.id)


def test_a_recording_stops_at_the_size_limit_and_stays_valid(host: HostProcess) -> None:
    """More output than recording_limit: the cast ends at the last whole event that fits, every
    line parses, the recording says why it stopped, and the terminal runs on."""
    terminal = create(
        host,
        command="head -c 200000 /dev/zero | tr '\\0' x; echo; echo flood-done; sleep 600",
        record=True,
    )
    # From offset 0: unset means output after the call starts, and the whole flood (its last
    # line too) may be out before WaitFor arrives (1 run in 4 under load waited 30 s for it).
    wait_output(host, terminal.id, "flood-done", after=0)
    cast, recording = download(host, terminal.id, piece=1024 * 1024)
    assert not recording.active and recording.stopped_reason == "size_limit"
    assert len(cast) == recording.size <= LIMIT
    # Filled to the limit: the event that would pass it is cut to what fits, not dropped (one
    # read of the flood can be larger than the whole limit, and the cast held none of it).
    assert recording.size > LIMIT - 64, recording.size
    _, events = parse(cast)
    assert events and set(output_of(events)) == {"x"}  # stopped inside the flood
    state = host.terminals.GetTerminal(pb.GetTerminalRequest(terminal_id=terminal.id), timeout=30)
    assert state.terminal.state == pb.TERMINAL_STATE_RUNNING
    error = refusal(
        lambda: host.terminals.GetRecording(
            pb.GetRecordingRequest(terminal_id=terminal.id, max_bytes=4 * 1024 * 1024), timeout=30
        )
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_bytes" in (error.details() or "")
    close(host, terminal.id)


def test_a_recording_ends_with_the_program_and_is_still_downloadable(host: HostProcess) -> None:
    terminal = create(host, command="echo goodbye-$((5*5))", record=True)
    wait_exit(host, terminal.id)
    cast, recording = download(host, terminal.id)
    assert not recording.active and recording.stopped_reason == "exited"
    assert "goodbye-25" in output_of(parse(cast)[1])
    error = refusal(lambda: set_recording(host, terminal.id, True))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "exited" in (error.details() or "")
    close(host, terminal.id)


def test_recording_needs_the_write_right_and_downloading_the_read_right(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(
        f"scribe {TOKENS['scribe']} terminal.create,terminal.write,terminal.close\n"
        f"viewer {TOKENS['viewer']} terminal.create,terminal.read,terminal.close\n"
    )
    host = start_host(tmp_path / "state", CONFIG, "--auth-tokens-file", str(tokens))
    try:
        for who in ("scribe", "viewer"):
            call: dict[str, Any] = {
                "metadata": (("authorization", f"Bearer {TOKENS[who]}"),),
                "timeout": 30,
            }
            request = pb.CreateTerminalRequest(
                argv=pb.Argv(args=SHELL), env=SHELL_ENV, cwd="/tmp", record=who == "scribe"
            )
            terminal = host.terminals.CreateTerminal(request, **call).terminal
            if who == "scribe":  # records, cannot download
                assert set_recording(host, terminal.id, True, **call).active
                error = refusal(lambda: download(host, terminal.id, **call))  # noqa: B023
                right = "terminal.read"
            else:  # downloads, cannot record
                error = refusal(lambda: set_recording(host, terminal.id, True, **call))  # noqa: B023
                right = "terminal.write"
            assert error.code() == grpc.StatusCode.PERMISSION_DENIED
            assert right in (error.details() or "")
            host.terminals.CloseTerminal(pb.CloseTerminalRequest(terminal_id=terminal.id), **call)
    finally:
        host.stop()
