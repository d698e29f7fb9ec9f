"""Attach: a snapshot at offset N, then output from N with offsets, then the exit; resume;
read-only; and a slow client that falls back to snapshots without holding the program up."""

from __future__ import annotations

import queue
from collections.abc import Iterator

import grpc
import pytest

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.terminals.support import (
    close,
    create,
    run,
    screen,
    shell,
    wait_exit,
    wait_output,
    write,
)


class Client:
    """An Attach stream whose request side stays open until ``done``."""

    def __init__(self, host: HostProcess, start: pb.AttachStart) -> None:
        self._requests: queue.Queue[pb.AttachRequest | None] = queue.Queue()
        self._requests.put(pb.AttachRequest(start=start))
        self.responses = host.terminals.Attach(self._iterate(), timeout=120)

    def _iterate(self) -> Iterator[pb.AttachRequest]:
        while (item := self._requests.get()) is not None:
            yield item

    def send(self, **kind: object) -> None:
        self._requests.put(pb.AttachRequest(**kind))  # type: ignore[arg-type]

    def next(self) -> pb.AttachResponse:
        return next(self.responses)

    def done(self) -> None:
        self._requests.put(None)
        self.responses.cancel()


def output_offset(host: HostProcess, terminal_id: str) -> int:
    """The offset the host's next output byte will get: all the output there was."""
    request = pb.GetTerminalRequest(terminal_id=terminal_id)
    return host.terminals.GetTerminal(request).terminal.output_offset


def test_attach_gives_a_snapshot_then_numbered_output_then_the_exit(host: HostProcess) -> None:
    """The snapshot shows the prompt at offset N; input typed through the stream comes back as output
    from N on, chunk offsets follow each other, and the stream ends with the exit status."""
    terminal = shell(host)
    client = Client(host, pb.AttachStart(terminal_id=terminal.id))
    started = client.next().started
    assert not started.read_only and not started.resumed and started.terminal.attached_clients == 1
    snapshot = client.next().snapshot
    assert snapshot.screen.lines[0].rstrip() == "ether$" and snapshot.screen.cursor.col == 7
    # Every cell is there (trailing spaces kept), so a client repaints the screen exactly.
    assert {len(line) for line in snapshot.screen.lines} == {snapshot.screen.cols}
    client.send(input=pb.TerminalInput(text="echo attached; exit 5\r"))
    offset, data = snapshot.offset, b""
    for message in client.responses:
        kind = message.WhichOneof("kind")
        if kind == "exit":
            assert message.exit.exit_status.code == 5
            break
        assert kind == "output" and message.output.offset == offset
        offset += len(message.output.data)
        data += message.output.data
    else:
        pytest.fail("the stream ended without an exit message")
    assert b"attached\r\n" in data
    assert offset == output_offset(host, terminal.id)  # every byte, none twice
    client.done()
    close(host, terminal.id)


def test_attach_resumes_from_the_last_offset_without_a_snapshot(host: HostProcess) -> None:
    """A client that reconnects with its last offset gets exactly the output it missed."""
    terminal = create(host, command="read first; echo one; read line; echo two:$line; sleep 600")
    first = Client(host, pb.AttachStart(terminal_id=terminal.id))
    first.next()
    offset = first.next().snapshot.offset
    write(host, terminal.id, "x\r")
    seen = b""
    while b"one\r\n" not in seen:
        message = first.next()
        assert message.output.offset == offset + len(seen)
        seen += message.output.data
    offset += len(seen)
    first.done()
    write(host, terminal.id, "go\r")
    wait_output(host, terminal.id, "two:go", after=0)
    second = Client(host, pb.AttachStart(terminal_id=terminal.id, from_offset=offset))
    started = second.next().started
    assert started.resumed
    missed = b""
    while b"two:go\r\n" not in missed:
        message = second.next()
        assert message.WhichOneof("kind") == "output" and message.output.offset == offset + len(
            missed
        )
        missed += message.output.data
    assert missed == b"go\r\ntwo:go\r\n"
    second.done()
    close(host, terminal.id)


def test_attach_from_an_offset_no_longer_held_starts_with_a_fresh_snapshot(
    host: HostProcess,
) -> None:
    """When the output a client asks for was dropped from the buffer, it gets a snapshot instead."""
    terminal = create(
        host, command="seq 1 400000; sleep 600"
    )  # ~2.6 MB, more than the 2 MiB buffer
    wait_output(host, terminal.id, "^400000$", after=0)
    client = Client(host, pb.AttachStart(terminal_id=terminal.id, from_offset=0))
    started = client.next().started
    assert not started.resumed and started.terminal.retained_offset > 0
    snapshot = client.next().snapshot
    assert (
        snapshot.screen.lines[-2].rstrip() == "400000"
        and snapshot.offset == started.terminal.output_offset
    )
    client.done()
    close(host, terminal.id)


def test_read_only_attach_refuses_input_and_ends_the_stream(host: HostProcess) -> None:
    """A read-only attach watches; sending input ends its stream with PERMISSION_DENIED."""
    terminal = shell(host)
    client = Client(host, pb.AttachStart(terminal_id=terminal.id, read_only=True))
    assert client.next().started.read_only
    client.next()  # the snapshot
    client.send(input=pb.TerminalInput(text="echo sneaky\r"))
    with pytest.raises(grpc.RpcError) as error:
        for _ in client.responses:
            pass
    assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "read-only" in (error.value.details() or "")
    assert "sneaky" not in "\n".join(
        host.terminals.ReadScreen(pb.ReadScreenRequest(terminal_id=terminal.id)).screen.lines
    )
    client.done()
    close(host, terminal.id)


def test_a_stalled_client_never_holds_up_the_program(host: HostProcess) -> None:
    """During a 20 MB flood one client reads everything while another reads nothing: the program
    finishes anyway; the stalled client then gets `lagged`, a fresh snapshot and the exit."""
    terminal = create(host, command="read go; seq 1 3000000", rows=24)
    fast = Client(host, pb.AttachStart(terminal_id=terminal.id))
    slow = Client(host, pb.AttachStart(terminal_id=terminal.id))
    assert fast.next().started and slow.next().started
    fast_offset = fast.next().snapshot.offset
    write(host, terminal.id, "go\r")
    received = 0
    for message in fast.responses:
        kind = message.WhichOneof("kind")
        if kind == "exit":
            break
        if kind == "output":
            assert message.output.offset == fast_offset
            fast_offset += len(message.output.data)
            received += len(message.output.data)
        else:  # a fast reader may still lag on a slow machine; then it resumes from a snapshot
            assert kind in ("lagged", "snapshot")
            fast_offset = message.snapshot.offset if kind == "snapshot" else fast_offset
    assert wait_exit(host, terminal.id).exit_status.code == 0
    kinds = [m.WhichOneof("kind") for m in slow.responses]
    assert kinds[0] == "snapshot" and kinds[-1] == "exit"
    lagged_at = kinds.index("lagged")
    assert kinds[lagged_at + 1] == "snapshot"
    total = host.terminals.GetTerminal(
        pb.GetTerminalRequest(terminal_id=terminal.id)
    ).terminal.output_offset
    assert total > 20_000_000 and fast_offset == total and received > 0
    fast.done()
    slow.done()
    close(host, terminal.id)


def test_a_flood_arrives_whole_in_order_in_chunks_of_at_most_512_kib(host: HostProcess) -> None:
    """A 1.3 MB flood (less than the lag limit, so no client can lag) reaches an attached client
    byte for byte: offsets follow each other, every chunk holds at most 512 KiB, and the bytes are
    the program's output exactly (the PTY turns each LF into CR LF)."""
    terminal = create(host, command="read go; seq 1 200000", rows=24)
    client = Client(host, pb.AttachStart(terminal_id=terminal.id))
    assert client.next().started
    offset = client.next().snapshot.offset
    write(host, terminal.id, "go\r")
    data = bytearray()
    for message in client.responses:
        kind = message.WhichOneof("kind")
        if kind == "exit":
            break
        assert kind == "output" and message.output.offset == offset
        assert 0 < len(message.output.data) <= 512 * 1024
        offset += len(message.output.data)
        data += message.output.data
    expected = "".join(f"{n}\r\n" for n in range(1, 200001)).encode()
    assert bytes(data) == b"go\r\n" + expected  # the typed line is echoed first
    assert offset == output_offset(host, terminal.id)  # every byte, none twice
    client.done()
    close(host, terminal.id)


def test_attach_resizes_and_signals_the_program(host: HostProcess) -> None:
    """Resize and signal messages on a writable attach reach the program: it sees the new size,
    and a signal ends it with that signal as its exit status."""
    terminal = shell(host)
    client = Client(host, pb.AttachStart(terminal_id=terminal.id))
    client.next()  # started
    snapshot = client.next().snapshot
    client.send(resize=pb.AttachResize(rows=33, cols=101))
    client.send(input=pb.TerminalInput(text="stty size\r"))
    # From the snapshot's offset: the answer may be out before the wait starts.
    wait_output(host, terminal.id, r"33 101", after=snapshot.offset)
    client.send(signal=pb.AttachSignal(signal="kill"))
    for message in client.responses:
        if message.WhichOneof("kind") == "exit":
            assert message.exit.exit_status.signal == 9
            break
    else:
        pytest.fail("the stream ended without an exit message")
    client.done()
    close(host, terminal.id)


@pytest.mark.parametrize(
    "request_kind",
    [
        {"resize": pb.AttachResize(rows=10, cols=10)},
        {"signal": pb.AttachSignal(signal="kill")},
    ],
    ids=["resize", "signal"],
)
def test_read_only_attach_refuses_resize_and_signal(
    host: HostProcess, request_kind: dict[str, object]
) -> None:
    """A read-only attach may not resize or signal: PERMISSION_DENIED, the program untouched."""
    terminal = shell(host)
    client = Client(host, pb.AttachStart(terminal_id=terminal.id, read_only=True))
    client.next()  # started
    client.next()  # snapshot
    client.send(**request_kind)
    with pytest.raises(grpc.RpcError) as error:
        for _ in client.responses:
            pass
    assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
    client.done()
    after = host.terminals.GetTerminal(pb.GetTerminalRequest(terminal_id=terminal.id)).terminal
    assert after.state == pb.TERMINAL_STATE_RUNNING
    assert (after.rows, after.cols) != (10, 10)
    close(host, terminal.id)


def test_boxes_drawn_with_dec_special_graphics_show_as_box_characters(host: HostProcess) -> None:
    """A program drawing with the DEC special graphics set (ESC ( 0 ... ESC ( B, and ESC ) 0
    with SO and SI) shows box characters, not the letters it wrote, in the TEXT and STRUCTURED
    screens, their styled runs, and an Attach snapshot."""
    terminal = shell(host)
    run(host, terminal.id, "printf '\\e(0lqqk\\e(B\\n\\e)0\\016x\\017ok\\016x\\017\\n'")
    box = ["\u250c\u2500\u2500\u2510", "\u2502ok\u2502"]

    def runs(lines: list[pb.StyledLine]) -> list[str]:
        return ["".join(piece.text for piece in line.runs) for line in lines]

    assert screen(host, terminal.id, format=pb.SCREEN_FORMAT_TEXT).lines[1:3] == box
    structured = screen(host, terminal.id, include_styles=True)
    assert structured.lines[1:3] == box and runs(structured.styled_lines[1:3]) == box
    client = Client(host, pb.AttachStart(terminal_id=terminal.id, read_only=True))
    assert client.next().WhichOneof("kind") == "started"
    snapshot = client.next().snapshot.screen
    assert [line.rstrip() for line in snapshot.lines[1:3]] == box
    assert [line.rstrip() for line in runs(snapshot.styled_lines[1:3])] == box
    client.done()
    close(host, terminal.id)


def test_attach_to_an_ended_program_shows_its_screen_and_exit_despite_a_resize(
    host: HostProcess,
) -> None:
    """A viewer that attaches after the program ended (a browser tab reopened) and sends its
    window size at once, as any viewer does, still gets the last screen and the exit status:
    the resize of a terminal whose program ended changes nothing and ends nothing."""
    terminal = create(host, command="echo it-ended; exit 3")
    wait_exit(host, terminal.id)
    client = Client(host, pb.AttachStart(terminal_id=terminal.id))
    client.send(resize=pb.AttachResize(rows=30, cols=100))  # right behind the start
    kinds, screen_text, code = [], "", None
    for message in client.responses:
        kind = message.WhichOneof("kind")
        kinds.append(kind)
        if kind == "snapshot":
            screen_text = "\n".join(message.snapshot.screen.lines)
        if kind == "exit":
            code = message.exit.exit_status.code
            break
    assert kinds[0] == "started" and "snapshot" in kinds and "it-ended" in screen_text
    assert code == 3
    client.done()
