"""Edge claims of docs/terminals.md that no other test asserted, checked as a user sees them: a
real host, real programs on its terminals, gRPC stubs.

- Reading the screen and waiting, `output`: "A match may span up to 64 KiB", also when the
  output it spans is searched in two pieces (WaitFor reads the output window 1 MiB at a time);
  `after_offset`'s "default: from now".
- Recording: "It is written where the output buffer is filled, so it holds every byte,
  including output a slow attached client skipped" -- with the default output window, and
  with a small `[terminals] output_buffer` (bytes went missing before: a fault, mended);
  "A failed write (full disk) stops it with `write_failed`" (the host's file-size rlimit
  lowered under the cast), the terminal running on and a new recording possible afterwards.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.terminals.conftest import CONFIG, start_host
from tests.terminals.support import close, create, wait, wait_output, write
from tests.terminals.test_attach import Client
from tests.terminals.test_recording import download, output_of, parse, set_recording

MIB = 1024 * 1024
SPAN = 64 * 1024  # the longest match the doc promises
# Room for WaitFor's second 1 MiB slice and a match after it (the default window is 2 MiB).
WIDE = CONFIG + f"output_buffer = {4 * MIB}\n"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = start_host(tmp_path_factory.mktemp("edges") / "state", WIDE)
    try:
        yield process
    finally:
        process.stop()


def get(host: HostProcess, terminal_id: str) -> pb.Terminal:
    request = pb.GetTerminalRequest(terminal_id=terminal_id)
    return host.terminals.GetTerminal(request, timeout=30).terminal


@pytest.mark.parametrize("slices", [1, 2])
def test_an_output_match_of_64_kib_spans_the_pieces_the_output_is_searched_in(
    host: HostProcess, slices: int
) -> None:
    """`output`: "A match may span up to 64 KiB". WaitFor searches output from `after_offset`
    in slices of 1 MiB; here a match of exactly 64 KiB starts 65,000 bytes before the end of
    the first (or, after the search has dropped text it no longer needs, the second) slice
    and ends in the next one. It is found, with its text, group and byte offsets."""
    before = slices * MIB - 65_000  # bytes of filler, then the match
    lines, rest = divmod(before, 101)  # 'a' * 99 + '\n', written as "\r\n": 101 bytes a line
    inner = SPAN - len("BEGIN") - len("END")
    script = (
        "import sys; w = sys.stdout.write; w('span-start\\n'); "
        f"w(('a' * 99 + '\\n') * {lines} + 'a' * {rest}); "
        f"w('BEGIN' + 'x' * {inner} + 'END\\nspan-done\\n'); sys.stdout.flush()"
    )
    terminal = create(host, command=f'python3 -c "{script}"; exec sleep 600')
    start = wait_output(host, terminal.id, r"span-start\n", after=0).match_end_offset
    wait_output(host, terminal.id, r"^span-done$", after=start)  # all of it in the window
    found = wait_output(host, terminal.id, r"BEGIN(x+)END", after=start)
    assert found.match_start_offset == start + before
    assert found.match_end_offset == start + before + SPAN
    assert len(found.match) == SPAN and list(found.groups) == ["x" * inner]
    close(host, terminal.id)


def test_an_output_wait_starts_from_now_by_default(host: HostProcess) -> None:
    """`output {regex, after_offset, raw}`: "the regex matches output written after
    `after_offset` (default: from now)". A program prints `tick-N` lines; a wait without
    `after_offset` matches a tick printed after the call, not the earlier ones still held, and
    text printed only before the call never matches."""
    terminal = create(
        host, command="for i in $(seq 1 3000); do echo tick-$i; sleep 0.05; done; exec sleep 600"
    )
    wait_output(host, terminal.id, r"^tick-3$", after=0)
    offset = get(host, terminal.id).output_offset
    found = wait(host, terminal.id, output=pb.OutputCondition(regex=r"tick-(\d+)"))
    assert found.match_start_offset >= offset and int(found.groups[0]) > 3, found.match
    with pytest.raises(grpc.RpcError) as error:
        wait(host, terminal.id, timeout=0.5, output=pb.OutputCondition(regex=r"^tick-2$"))
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    close(host, terminal.id)


FLOOD = 10_000_000


def flooded_cast(host: HostProcess, viewer: bool) -> tuple[str, pb.Recording, list[str]]:
    """Record a terminal printing FLOOD bytes of `y` (with a viewer attached that reads nothing
    until the end, when ``viewer``): the cast's output text, the recording's state and the kinds
    of the viewer's messages."""
    terminal = create(
        host,
        command=f"stty -echo; read go; head -c {FLOOD} /dev/zero | tr '\\0' y; "
        "echo; echo flood-done; exec sleep 600",
        record=True,
    )
    kinds: list[str] = []
    stalled = None
    if viewer:
        stalled = Client(host, pb.AttachStart(terminal_id=terminal.id, read_only=True))
        assert stalled.next().WhichOneof("kind") == "started"
    write(host, terminal.id, "go\r")
    wait_output(host, terminal.id, "flood-done", after=0, timeout=120)
    if stalled is not None:  # its messages up to `lagged`, or up to the end of the output
        end = get(host, terminal.id).output_offset
        for message in stalled.responses:
            kinds.append(kind := message.WhichOneof("kind") or "")
            reached = message.output.offset + len(message.output.data)
            if kind == "lagged" or (kind == "output" and reached >= end):
                break
        stalled.done()
    cast, recording = download(host, terminal.id, piece=MIB)
    close(host, terminal.id)
    return output_of(parse(cast)[1]), recording, kinds


def test_a_recording_holds_every_byte_a_stalled_viewer_skipped(host: HostProcess) -> None:
    """Recording: "It is written where the output buffer is filled, so it holds every byte,
    including output a slow attached client skipped". A viewer attached to a recorded terminal
    reads nothing while the program prints 10 MB (more than `attach_lag` and the output
    window): the viewer is told it lagged, and the cast holds all 10 MB."""
    text, recording, kinds = flooded_cast(host, viewer=True)
    assert "lagged" in kinds, kinds
    assert recording.active and not recording.stopped_reason
    count = text.count("y")  # not in the assertion: pytest would print 10 MB
    assert count == FLOOD and text.endswith("y\r\nflood-done\r\n"), count


def test_a_recording_holds_every_byte_with_a_small_output_window(tmp_path: Path) -> None:
    """The same claim with `[terminals] output_buffer = 65536` (the smallest the config takes;
    the doc sizes only the window "for Attach replay, WaitFor and the emulator"): the cast of a
    10 MB flood holds all 10 MB. (Before, one wake of the host read up to 2 MiB into the 64 KiB
    ring before handing the recording its bytes: some 2 MB of the 10 went missing.)"""
    host = start_host(tmp_path / "state", CONFIG + f"output_buffer = {64 * 1024}\n")
    try:
        text, recording, _ = flooded_cast(host, viewer=False)
        assert recording.active
        count = text.count("y")
        assert count == FLOOD, f"{FLOOD - count} bytes missing"
    finally:
        host.stop()


def test_a_failed_write_stops_the_recording_with_write_failed(tmp_path: Path) -> None:
    """Recording: "A failed write (full disk) stops it with `write_failed`". The host's file-size
    rlimit is lowered to 1 MiB (its writes then fail with EFBIG, as with a full disk) before a
    recorded program prints 3 MB: GetRecording says the recording stopped, `write_failed`, and
    serves what was written (at most 1 MiB), a valid file whose last line is whole; the host logs a warning naming the terminal; the program runs on
    and its output is still read. Once the disk takes writes again, SetRecording starts a new
    recording."""
    host = start_host(tmp_path / "state")
    try:
        terminal = create(
            host,
            command="stty -echo; while read n; do head -c $n /dev/zero | tr '\\0' y; echo; "
            "echo printed-$n; done",
            record=True,
        )
        soft, hard = resource.prlimit(host.process.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(host.process.pid, resource.RLIMIT_FSIZE, (MIB, hard))
        try:
            write(host, terminal.id, "3000000\r")
            wait_output(host, terminal.id, r"^printed-3000000$", after=0, timeout=60)
            cast, recording = download(host, terminal.id, piece=MIB)
            assert not recording.active and recording.stopped_reason == "write_failed"
            assert 0 < len(cast) == recording.size <= MIB
            assert cast.startswith(b'{"version":2')
            # cut back to its last whole line: every line of it reads (a valid file)
            assert cast.endswith(b"\n") and parse(cast)[1], cast[-200:]
        finally:
            resource.prlimit(host.process.pid, resource.RLIMIT_FSIZE, (soft, hard))
        warning = host.wait_for_log(
            lambda r: r.get("event") == "could not write a terminal recording; stopped"
        )
        assert warning["terminal"] == terminal.id and "File too large" in warning["error"]
        assert get(host, terminal.id).state == pb.TERMINAL_STATE_RUNNING
        write(host, terminal.id, "10\r")
        wait_output(host, terminal.id, r"^printed-10$", after=0)

        again = set_recording(host, terminal.id, True)
        assert again.active and not again.stopped_reason
        write(host, terminal.id, "20\r")
        wait_output(host, terminal.id, r"^printed-20$", after=0)
        cast, recording = download(host, terminal.id)
        assert recording.active and "printed-20" in output_of(parse(cast)[1])
        close(host, terminal.id)
    finally:
        host.stop()
