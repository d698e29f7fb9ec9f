"""What every client subcommand of ``ether`` shares: where the host is, the token, the
channel, and how a failed RPC is told to the user and turned into an exit status."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import unicodedata
from collections.abc import Callable
from typing import Any, TextIO

DEFAULT_ADDRESS = "127.0.0.1:50051"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PARTIAL, EXIT_UNREACHABLE = 0, 1, 2, 3, 4
HOST_ERROR_DOMAIN = "ether"  # ErrorInfo.domain of the host's own errors (transport/status.py)
MAX_MESSAGE_BYTES = 64 << 20

Metadata = tuple[tuple[str, str | bytes], ...]


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """--address, --token and the TLS files, defaulting to $ETHER_ADDRESS, $ETHER_TOKEN,
    $ETHER_TLS_CA, $ETHER_TLS_CLIENT_CERT and $ETHER_TLS_CLIENT_KEY."""
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
    parser.add_argument(
        "--tls-ca",
        default=os.environ.get("ETHER_TLS_CA", ""),
        help="connect with TLS, trusting the host's certificate if this CA (PEM) signed it "
        "(default $ETHER_TLS_CA)",
    )
    parser.add_argument(
        "--tls-cert",
        default=os.environ.get("ETHER_TLS_CLIENT_CERT", ""),
        help="client certificate (PEM) for a host that asks for one (default $ETHER_TLS_CLIENT_CERT)",
    )
    parser.add_argument(
        "--tls-key",
        default=os.environ.get("ETHER_TLS_CLIENT_KEY", ""),
        help="the client certificate's private key (PEM) (default $ETHER_TLS_CLIENT_KEY)",
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


def connect(args: argparse.Namespace, *, aio: bool = False) -> tuple[Any, Metadata]:
    """A channel to the host and the call metadata carrying the token, if any; ``aio``: a
    grpc.aio channel, for commands that run an event loop (``ether mcp``)."""
    import grpc  # imported late: `ether --help` should not load grpc

    kind: Any = grpc.aio if aio else grpc
    metadata: Metadata = (("authorization", f"Bearer {args.token}"),) if args.token else ()
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    tls = getattr(args, "tls_ca", "") or getattr(args, "tls_cert", "")
    if not tls:
        return kind.insecure_channel(args.address, options=options), metadata
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(args.tls_ca),
        private_key=_read(args.tls_key),
        certificate_chain=_read(args.tls_cert),
    )
    return kind.secure_channel(args.address, credentials, options=options), metadata


def _read(path: str) -> bytes | None:
    """A PEM file's bytes (None for ''); a file that cannot be read ends the command (exit 2)."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        print(f"ether: cannot read {path}: {error.strerror}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def report_rpc_error(error: Any, err: TextIO, prog: str) -> int:
    """Print a failed call's status, message and field violations; its exit status: 2 for a
    request the host refused as invalid, 4 when the host could not be reached, else 1."""
    import grpc
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    code = error.code()
    print(f"{prog}: {code.name}: {error.details()}", file=err)
    status = rpc_status.from_call(error)
    answered = False  # by the host itself: its errors carry an ErrorInfo of its domain
    for detail in status.details if status is not None else []:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            answered = answered or info.domain == HOST_ERROR_DOMAIN
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            for violation in bad.field_violations:
                print(f"  {violation.field}: {violation.description}", file=err)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return EXIT_USAGE
    # UNAVAILABLE the host answered itself (an agent died under the task, the host is
    # stopping) is a failed call like any other: 4 says only that no host answered.
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and not answered:
        return EXIT_UNREACHABLE
    return EXIT_FAILED


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    """-o/--output: a table for people (the default) or a JSON array for scripts."""
    parser.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="table (default) or json: a JSON array, one object per row, every field",
    )


def every_page(method: Any, request: Any, field: str, metadata: Metadata) -> list[Any]:
    """The items of every page of a paginated List call, following next_page_token."""
    found: list[Any] = []
    while True:
        page = method(request, timeout=30, metadata=metadata)
        found.extend(getattr(page, field))
        if not page.next_page_token:
            return found
        request.page_token = page.next_page_token


def enum_name(enum: Any, value: int) -> str:
    """AGENT_STATE_RUNNING -> RUNNING: the value's name without the enum's prefix."""
    name: str = enum.Name(value)
    prefix = enum.DESCRIPTOR.values[0].name.removesuffix("UNSPECIFIED")
    return name.removeprefix(prefix)


def print_json(messages: list[Any], out: TextIO) -> None:
    """Protobuf messages as one JSON array (the proto3 JSON mapping, fields left at their
    default included, so a script finds every key in every object)."""
    from google.protobuf import json_format

    listed = [
        json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
        for message in messages
    ]
    out.write(json.dumps(listed, indent=2, ensure_ascii=False) + "\n")


def print_table(header: list[str], rows: list[list[str]], out: TextIO) -> None:
    """Columns padded to their widest cell, two spaces apart, as `docker ps` prints them. Widths
    are terminal cells (rich's), so wide (CJK) and combining characters line up; control
    characters in a cell are shown as '?', so a name cannot move the cursor or break a row."""
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    cells = [[_printable(cell) for cell in row] for row in [header, *rows]]
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_header=False, show_edge=False)
    for _ in header:
        table.add_column(no_wrap=True, overflow="ignore")
    for row in cells:
        table.add_row(*(Text(cell) for cell in row))
    widths = [max(cell_len(row[i]) for row in cells) for i in range(len(header))]
    width = sum(widths) + 2 * (len(widths) - 1) + 1  # the whole row, never wrapped
    console = Console(
        file=io.StringIO(),
        width=width,
        color_system=None,
        highlight=False,
        markup=False,
        emoji=False,
        legacy_windows=False,
    )
    with console.capture() as capture:
        console.print(table)
    for line in capture.get().splitlines():
        out.write(line.rstrip() + "\n")


def _printable(cell: str) -> str:
    return "".join("?" if unicodedata.category(c) == "Cc" else c for c in cell)
