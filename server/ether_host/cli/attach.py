"""``ether term attach``: join a terminal as tmux attach does. The local terminal goes raw, what
you type goes to the program, its output comes back, and the terminal follows your window's size;
``Ctrl-]`` detaches and leaves the program running. With stdin not a terminal, stdin is sent as
input and its end only ends input; output goes on until the program exits. ``attach`` exits with
the program's status when it exits (128 + N for a signal), 0 when detached.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO, TextIO

from ether_host.cli import repaint
from ether_host.cli.client import EXIT_FAILED, EXIT_OK

DETACH_KEY = b"\x1d"  # Ctrl-]
READ_BYTES = 4096


def local_size(rows: int, cols: int) -> tuple[int, int]:
    """The size asked for, else this terminal's (0 where neither is known: the host's default)."""
    if rows and cols:
        return rows, cols
    if not os.isatty(sys.stdout.fileno()):
        return rows, cols
    size = shutil.get_terminal_size()
    return rows or size.lines, cols or size.columns


def attach(
    args: argparse.Namespace, terminals: Any, metadata: Any, err: TextIO, keys: BinaryIO | None
) -> int:
    from ether.v1 import terminal_pb2

    keys = keys or sys.stdin.buffer
    interactive = os.isatty(keys.fileno()) and os.isatty(sys.stdout.fileno())
    requests: queue.Queue[Any] = queue.Queue()
    requests.put(
        terminal_pb2.AttachRequest(
            start=terminal_pb2.AttachStart(terminal_id=args.terminal_id, read_only=args.read_only)
        )
    )
    if interactive and not args.read_only:
        rows, cols = local_size(0, 0)
        requests.put(_resize(rows, cols))
    stream = terminals.Attach(_until_none(requests), metadata=metadata)
    detached = threading.Event()

    def detach() -> None:
        detached.set()
        stream.cancel()

    if not args.read_only:
        threading.Thread(
            target=_forward_keys, args=(keys, requests, detach, interactive), daemon=True
        ).start()
    screen = sys.stdout.buffer
    local = repaint.LocalScreen()
    with _raw(keys if interactive else None), _follow_window_size(interactive, requests):
        try:
            for message in stream:
                kind = message.WhichOneof("kind")
                if kind == "snapshot" and interactive:
                    screen.write(local.repaint(message.snapshot.screen))
                elif kind == "snapshot":
                    screen.write(_piped_snapshot(message.snapshot.screen))
                elif kind == "output":
                    local.saw(message.output.data)
                    screen.write(message.output.data)
                elif kind == "lagged":
                    screen.write(b"\r\n[ether: output skipped, repainting]\r\n")
                elif kind == "exit":
                    screen.flush()
                    return _exit_code(message.exit.exit_status)
                screen.flush()
        except Exception as error:  # grpc.RpcError, including our own cancel on detach
            if not detached.is_set():
                raise
            del error
        finally:
            requests.put(None)
            if interactive:  # the program may have hidden the cursor or left a colour on
                screen.write(local.restore())
                screen.flush()
    if detached.is_set():
        print(f"\r\n[detached from {args.terminal_id}]", file=err)
        return EXIT_OK
    return EXIT_FAILED


def _until_none(requests: queue.Queue[Any]) -> Iterator[Any]:
    while (item := requests.get()) is not None:
        yield item


def _resize(rows: int, cols: int) -> Any:
    from ether.v1 import terminal_pb2

    return terminal_pb2.AttachRequest(resize=terminal_pb2.AttachResize(rows=rows, cols=cols))


def _forward_keys(
    keys: BinaryIO, requests: queue.Queue[Any], detach: Any, interactive: bool
) -> None:
    """Send what is typed (or piped) as input; Ctrl-] on a terminal detaches. The end of a
    piped stdin only ends input (the request side closes); output goes on."""
    from ether.v1 import terminal_pb2

    fd = keys.fileno()
    while data := os.read(fd, READ_BYTES):
        if interactive and DETACH_KEY in data:
            before = data.split(DETACH_KEY, 1)[0]
            if before:
                requests.put(
                    terminal_pb2.AttachRequest(input=terminal_pb2.TerminalInput(data=before))
                )
            detach()
            return
        requests.put(terminal_pb2.AttachRequest(input=terminal_pb2.TerminalInput(data=data)))
    requests.put(None)


@contextlib.contextmanager
def _raw(keys: BinaryIO | None) -> Iterator[None]:
    """The local terminal in raw mode (keys pass through, no local echo), restored after."""
    if keys is None:
        yield
        return
    import termios
    import tty

    fd = keys.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def _follow_window_size(interactive: bool, requests: queue.Queue[Any]) -> Iterator[None]:
    """Resize the remote terminal whenever the local window changes size (SIGWINCH)."""
    if not interactive:
        yield
        return

    def resized(signum: int, frame: Any) -> None:
        del signum, frame
        size = shutil.get_terminal_size()
        requests.put(_resize(size.lines, size.columns))

    previous = signal.signal(signal.SIGWINCH, resized)
    try:
        yield
    finally:
        signal.signal(signal.SIGWINCH, previous)


def _piped_snapshot(screen: Any) -> bytes:
    """A snapshot for a pipe: the screen's text up to the cursor's line, where the output that
    follows goes on."""
    # The snapshot keeps trailing spaces (their background may be coloured): a pipe gets none.
    lines = [line.rstrip(" ") for line in screen.lines[: screen.cursor.row + 1]]
    if lines:  # the cursor may stand past the last character of its line
        lines[-1] = lines[-1].ljust(screen.cursor.col)
    return "\n".join(lines).encode()


def _exit_code(status: Any) -> int:
    if status.HasField("code"):
        return int(status.code)
    return 128 + status.signal if status.signal else EXIT_FAILED
