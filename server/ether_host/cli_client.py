"""What every client subcommand of ``ether`` shares: where the host is, the token, the
channel, and how a failed RPC is told to the user and turned into an exit status."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any, TextIO

DEFAULT_ADDRESS = "127.0.0.1:50051"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PARTIAL, EXIT_UNREACHABLE = 0, 1, 2, 3, 4
MAX_MESSAGE_BYTES = 64 << 20

Metadata = tuple[tuple[str, str | bytes], ...]


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """--address and --token, defaulting to $ETHER_ADDRESS and $ETHER_TOKEN."""
    parser.add_argument(
        "--address",
        default=os.environ.get("ETHER_ADDRESS", DEFAULT_ADDRESS),
        help=f"host address: HOST:PORT or unix:PATH (default $ETHER_ADDRESS, then {DEFAULT_ADDRESS})",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("ETHER_TOKEN", ""),
        help="bearer token when the host has auth on (default $ETHER_TOKEN)",
    )


def command_group(
    commands: Any, name: str, text: str, dest: str
) -> Callable[[str, str], argparse.ArgumentParser]:
    """Add ``ether NAME`` with subcommands (chosen one in ``args.<dest>``); returns the maker of
    its subcommands, each with --address and --token."""
    parser_class = getattr(commands, "_parser_class", None) or argparse.ArgumentParser
    group = commands.add_parser(name, help=text)
    group.set_defaults(command_parser=group)
    actions = group.add_subparsers(dest=dest, required=True, parser_class=parser_class)

    def subcommand(sub: str, sub_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(
            sub, help=sub_text, description=sub_text
        )
        parser.set_defaults(command_parser=parser)
        add_connection_arguments(parser)
        return parser

    return subcommand


def connect(args: argparse.Namespace) -> tuple[Any, Metadata]:
    """A channel to the host and the call metadata carrying the token, if any."""
    import grpc  # imported late: `ether --help` should not load grpc

    metadata: Metadata = (("authorization", f"Bearer {args.token}"),) if args.token else ()
    channel = grpc.insecure_channel(
        args.address, options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    )
    return channel, metadata


def report_rpc_error(error: Any, err: TextIO, prog: str) -> int:
    """Print a failed call's status, message and field violations; its exit status: 2 for a
    request the host refused as invalid, 4 when the host could not be reached, else 1."""
    import grpc
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    code = error.code()
    print(f"{prog}: {code.name}: {error.details()}", file=err)
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else []:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            for violation in bad.field_violations:
                print(f"  {violation.field}: {violation.description}", file=err)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return EXIT_USAGE
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return EXIT_UNREACHABLE
    return EXIT_FAILED


def print_table(header: list[str], rows: list[list[str]], out: TextIO) -> None:
    """Columns padded to their widest cell, two spaces apart, as `docker ps` prints them."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        out.write(line.rstrip() + "\n")
