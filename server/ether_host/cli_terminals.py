"""``ether term new|ls|attach|screen|kill``: the host's terminals from a shell.

``attach`` joins a terminal as tmux attach does: the local terminal goes raw, what you type
goes to the program, its output comes back, and the terminal follows your window's size;
``Ctrl-]`` detaches and leaves the program running. With stdin not a terminal, stdin is sent as
input and its end only ends input; output goes on until the program exits. ``attach`` exits
with the program's status when it exits (128 + N for a signal), 0 when detached.
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

from ether_host import cli_repaint
from ether_host.cli_client import (
    EXIT_FAILED,
    EXIT_OK,
    command_group,
    connect,
    print_table,
    report_rpc_error,
)

DETACH_KEY = b"\x1d"  # Ctrl-]
READ_BYTES = 4096


def add_parser(commands: Any) -> None:
    """Register ``term`` and its subcommands on the ``ether`` command's subparsers."""
    sub = command_group(
        commands, "term", "create, list, attach to and close terminals", dest="term_command"
    )
    new = sub("new", "start a program on a new terminal and print its id")
    new.add_argument("--name", default="", help="a name of your own")
    new.add_argument("--rows", type=int, default=0, help="default: this terminal's, then 24")
    new.add_argument("--cols", type=int, default=0, help="default: this terminal's, then 80")
    new.add_argument("--cwd", default="", help="absolute working directory on the host")
    new.add_argument("--attach", action="store_true", help="attach to it at once")
    new.add_argument("argv", nargs="*", help="the program and its arguments (after --)")
    sub("ls", "the terminals you may see")
    attach = sub("attach", "join a terminal interactively (Ctrl-] detaches)")
    attach.add_argument("terminal_id")
    attach.add_argument("--read-only", action="store_true", help="watch without typing")
    sub("screen", "print a terminal's screen as text").add_argument("terminal_id")
    sub("kill", "close a terminal (SIGHUP, then SIGKILL)").add_argument("terminal_id")


def run(
    args: argparse.Namespace,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    keys: BinaryIO | None = None,
) -> int:
    """Entry point of ``ether term ...``."""
    import grpc  # imported late: `ether --help` should not load grpc

    from ether.v1 import terminal_pb2, terminal_pb2_grpc

    channel, metadata = connect(args)
    terminals = terminal_pb2_grpc.TerminalServiceStub(channel)
    try:
        if args.term_command == "new":
            rows, cols = _local_size(args.rows, args.cols)
            request = terminal_pb2.CreateTerminalRequest(
                argv=terminal_pb2.Argv(args=args.argv or [os.environ.get("SHELL", "/bin/sh")]),
                name=args.name,
                rows=rows,
                cols=cols,
                cwd=args.cwd,
            )
            terminal = terminals.CreateTerminal(request, timeout=30, metadata=metadata).terminal
            if not args.attach:
                print(terminal.id, file=out)
                return EXIT_OK
            args.terminal_id, args.read_only = terminal.id, False
            return _attach(args, terminals, metadata, err, keys)
        if args.term_command == "ls":
            listed = terminals.ListTerminals(
                terminal_pb2.ListTerminalsRequest(page_size=1000), timeout=30, metadata=metadata
            )
            _list(listed.terminals, out)
            return EXIT_OK
        if args.term_command == "attach":
            return _attach(args, terminals, metadata, err, keys)
        if args.term_command == "screen":
            screen = terminals.ReadScreen(
                terminal_pb2.ReadScreenRequest(terminal_id=args.terminal_id),
                timeout=30,
                metadata=metadata,
            ).screen
            out.write("\n".join(screen.lines).rstrip("\n") + "\n")
            return EXIT_OK
        terminals.CloseTerminal(
            terminal_pb2.CloseTerminalRequest(terminal_id=args.terminal_id),
            timeout=60,
            metadata=metadata,
        )
        return EXIT_OK
    except grpc.RpcError as error:
        return report_rpc_error(error, err, f"ether term {args.term_command}")
    finally:
        channel.close()


def _list(found: Any, out: TextIO) -> None:
    from ether.v1 import terminal_pb2

    header = ["ID", "NAME", "OWNER", "STATE", "SIZE", "ATTACHED", "COMMAND"]
    rows = [
        [
            t.id,
            t.name or "-",
            t.owner,
            terminal_pb2.TerminalState.Name(t.state).removeprefix("TERMINAL_STATE_"),
            f"{t.cols}x{t.rows}",
            str(t.attached_clients),
            " ".join(t.argv),
        ]
        for t in found
    ]
    print_table(header, rows, out)


def _local_size(rows: int, cols: int) -> tuple[int, int]:
    """The size asked for, else this terminal's (0 where neither is known: the host's default)."""
    if rows and cols:
        return rows, cols
    if not os.isatty(sys.stdout.fileno()):
        return rows, cols
    size = shutil.get_terminal_size()
    return rows or size.lines, cols or size.columns


def _attach(
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
        rows, cols = _local_size(0, 0)
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
    local = cli_repaint.LocalScreen()
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
