"""``ether term new|ls|attach|screen|kill``: the host's terminals from a shell (``attach``, the
interactive join, is in attach.py). ``ls`` prints a table, or a JSON array with ``-o json``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, BinaryIO, TextIO

from ether_host.cli import attach
from ether_host.cli.client import (
    EXIT_OK,
    add_output_argument,
    command_group,
    connect,
    enum_name,
    print_json,
    print_table,
    report_rpc_error,
)


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
    listing = sub("ls", "the terminals you may see")
    listing.add_argument(
        "--cluster", action="store_true", help="every host's terminals (a host in a cluster)"
    )
    add_output_argument(listing)
    joining = sub("attach", "join a terminal interactively (Ctrl-] detaches)")
    joining.add_argument("terminal_id")
    joining.add_argument("--read-only", action="store_true", help="watch without typing")
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
            rows, cols = attach.local_size(args.rows, args.cols)
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
            return attach.attach(args, terminals, metadata, err, keys)
        if args.term_command == "ls":
            found, unreachable = _list(terminals, args.cluster, metadata)
            if args.output == "json":
                print_json(found, out)
            else:
                _table(found, out, hosts=args.cluster)
            for host in unreachable:  # the list is still worth printing: say what it lacks
                print(
                    f"ether term ls: host {host} did not answer; its terminals are not listed",
                    file=err,
                )
            return EXIT_OK
        if args.term_command == "attach":
            return attach.attach(args, terminals, metadata, err, keys)
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


def _list(terminals: Any, cluster: bool, metadata: Any) -> tuple[list[Any], list[str]]:
    """Every page of ListTerminals, and (with ``cluster``) the hosts that did not answer."""
    from ether.v1 import terminal_pb2

    request = terminal_pb2.ListTerminalsRequest(page_size=1000, cluster=cluster)
    found: list[Any] = []
    unreachable: set[str] = set()
    while True:
        page = terminals.ListTerminals(request, timeout=60, metadata=metadata)
        found.extend(page.terminals)
        unreachable.update(page.unreachable_hosts)
        if not page.next_page_token:
            return found, sorted(unreachable)
        request.page_token = page.next_page_token


def _table(found: list[Any], out: TextIO, *, hosts: bool = False) -> None:
    from ether.v1 import terminal_pb2

    header = ["ID", "NAME", "OWNER", "STATE", "SIZE", "ATTACHED", "COMMAND"]
    rows = [
        [
            *([t.host or "-"] if hosts else []),
            t.id,
            t.name or "-",
            t.owner,
            enum_name(terminal_pb2.TerminalState, t.state),
            f"{t.cols}x{t.rows}",
            str(t.attached_clients),
            " ".join(t.argv),
        ]
        for t in found
    ]
    print_table(["HOST", *header] if hosts else header, rows, out)
