"""``ether chat``: talk to an I/O gateway agent from a terminal or a pipe.

Opens a session (or resumes one with ``--session``), sends each line of stdin as a user
message, and prints the session's events as they come: replies, context changes, progress,
errors, failovers and custom events (``--verbose`` adds step timings, ``--json`` prints every
event as one JSON line). At the end of stdin it waits for the last replies and exits 0; 1 for a
failed call, 2 for a request the host refuses as invalid (or a ``--context`` that is not a JSON
object), 4 when the host cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from ether_host.cli.client import (
    EXIT_OK,
    EXIT_USAGE,
    add_connection_arguments,
    connect,
    report_rpc_error,
)


def add_parser(commands: Any) -> None:
    """Register ``chat`` on the ``ether`` command's subparsers."""
    chat = commands.add_parser(
        "chat", help="talk to a gateway agent (one line of stdin per message)"
    )
    chat.set_defaults(command_parser=chat)
    add_connection_arguments(chat)
    target = chat.add_mutually_exclusive_group()
    target.add_argument("--agent", default="", help="the gateway agent to talk to, by name")
    target.add_argument(
        "--capability", default="", help="any gateway agent offering this capability"
    )
    target.add_argument("--session", default="", help="resume this session instead of opening one")
    chat.add_argument(
        "--after", type=int, default=None, help="with --session: replay events after this sequence"
    )
    chat.add_argument(
        "--context", default="", help="initial context of a new session, as a JSON object"
    )
    chat.add_argument("--close", action="store_true", help="close the session when stdin ends")
    chat.add_argument("--json", action="store_true", help="print every event as a JSON line")
    chat.add_argument(
        "-v", "--verbose", action="store_true", help="also print step and turn timings"
    )


def run(
    args: argparse.Namespace,
    out: TextIO = sys.stdout,
    lines: TextIO = sys.stdin,
    err: TextIO = sys.stderr,
) -> int:
    """Entry point of ``ether chat``."""
    import grpc  # imported late: `ether --help` should not load grpc
    from google.protobuf import json_format, struct_pb2

    from ether.v1 import gateway_pb2, gateway_pb2_grpc

    context = struct_pb2.Struct()
    if args.context:
        try:
            json_format.Parse(args.context, context)
        except json_format.ParseError as error:
            print(f"ether chat: --context is not a JSON object: {error}", file=err)
            return EXIT_USAGE
    channel, metadata = connect(args)
    gateway = gateway_pb2_grpc.GatewayServiceStub(channel)
    try:
        if args.session:
            session_id = args.session
        else:
            request = gateway_pb2.OpenSessionRequest()
            if args.agent:  # one of a oneof: setting the other, even to "", would clear it
                request.agent = args.agent
            elif args.capability:
                request.capability = args.capability
            if args.context:
                request.context.CopyFrom(context)
            session = gateway.OpenSession(request, timeout=30, metadata=metadata).session
            session_id = session.id
            if not args.json:
                print(f"# session {session.id} with {session.agent}", file=out, flush=True)

        def requests() -> Iterator[gateway_pb2.ConverseRequest]:
            start = gateway_pb2.ConverseStart(session_id=session_id)
            if args.after is not None:
                start.after_sequence = args.after
            yield gateway_pb2.ConverseRequest(start=start)
            for line in lines:
                text = line.strip()
                if text:
                    yield gateway_pb2.ConverseRequest(message=gateway_pb2.UserMessage(text=text))

        printer = _Printer(out, args.verbose)
        for event in gateway.Converse(requests(), metadata=metadata):
            if args.json:
                print(json_format.MessageToJson(event, indent=None), file=out, flush=True)
            else:
                printer.show(event)
        if args.close:
            gateway.CloseSession(
                gateway_pb2.CloseSessionRequest(session_id=session_id, reason="chat ended"),
                timeout=30,
                metadata=metadata,
            )
        elif not args.json:
            print(f"# resume with: ether chat --session {session_id}", file=out, flush=True)
        return EXIT_OK
    except grpc.RpcError as error:
        return report_rpc_error(error, err, "ether chat")
    except KeyboardInterrupt:
        return 130
    finally:
        channel.close()


class _Printer:
    """One line per event, for people."""

    def __init__(self, out: TextIO, verbose: bool) -> None:
        self.out = out
        self.verbose = verbose
        self.partial = False

    def _line(self, text: str) -> None:
        if self.partial:
            self.out.write("\n")
            self.partial = False
        print(text, file=self.out, flush=True)

    def show(self, event: Any) -> None:
        from google.protobuf import json_format

        kind = event.WhichOneof("event")
        if kind == "reply":
            reply = event.reply
            if reply.partial:
                if not self.partial:
                    self.out.write(f"{reply.agent}: ")
                self.out.write(reply.text)
                self.out.flush()
                self.partial = True
            elif self.partial:
                self.out.write(reply.text + "\n")
                self.out.flush()
                self.partial = False
            else:
                self._line(f"{reply.agent}: {reply.text}")
        elif kind == "context_changed":
            change = event.context_changed
            self._line(
                f"  [context v{change.version} by {change.author}: {', '.join(change.keys)}]"
            )
        elif kind == "progress":
            progress = event.progress
            where = f"{progress.step}: " if progress.step else ""
            total = f" ({progress.progress:g}/{progress.total:g})" if progress.total else ""
            self._line(f"  [progress {where}{progress.message}{total}]")
        elif kind == "error":
            error = event.error
            where = f"{error.step}: " if error.step else ""
            self._line(f"  [error {where}{error.error.code}: {error.error.message}]")
        elif kind == "agent_failover":
            failover = event.agent_failover
            self._line(
                f"  [failover {failover.from_agent} -> {failover.to_agent}: {failover.reason}]"
            )
        elif kind == "custom":
            custom = event.custom
            data = (
                json.dumps(_plain(json_format.MessageToDict(custom.data)))
                if custom.HasField("data")
                else ""
            )
            self._line(f"  [{custom.type} from {custom.agent}] {data}".rstrip())
        elif kind == "session_closed":
            self._line(f"[session closed: {event.session_closed.reason}]")
        elif self.verbose and kind == "step_completed":
            step = event.step_completed
            millis = step.latency.ToNanoseconds() / 1e6
            self._line(f"  [step {step.step}: {step.agent}.{step.action} {millis:.0f} ms]")
        elif self.verbose and kind == "turn_completed":
            done = event.turn_completed
            self._line(f"  [turn {event.turn} done in {done.latency.ToNanoseconds() / 1e6:.0f} ms]")


def _plain(value: Any) -> Any:
    """JSON numbers come back from protobuf as floats; print the whole ones as integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
