"""``ether call AGENT ACTION [PARAMS]``: run one task and print its result as JSON on stdout
(progress and logs on stderr with ``--stream``). It exits 0 for SUCCESS, 3 for PARTIAL and 1 for
ERROR or a failed call, 2 for a request the host refuses as invalid, 4 when the host cannot be
reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from ether_host.cli.client import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_USAGE,
    add_connection_arguments,
    connect,
    report_rpc_error,
)


def add_parser(commands: Any) -> None:
    """Register ``call`` on the ``ether`` command's subparsers."""
    call = commands.add_parser(
        "call",
        help="run one task and print its result",
        description="Exit status: 0 SUCCESS, 3 PARTIAL, 1 ERROR or a failed call, 2 a request "
        "the host refused (unknown action, params not matching the schema), 4 host unreachable.",
    )
    call.set_defaults(command_parser=call)
    call.add_argument("agent")
    call.add_argument("action")
    call.add_argument(
        "params", nargs="?", default="{}", help="a JSON object, or - to read it from stdin"
    )
    call.add_argument("--timeout", type=float, default=None, help="deadline, in seconds")
    call.add_argument("--task-id", default="", help="an id of your own (for CancelTask)")
    call.add_argument(
        "--max-cost", type=float, default=None, help="budget: the most the task may report"
    )
    call.add_argument(
        "--stream", action="store_true", help="show progress and log events on stderr"
    )
    call.add_argument(
        "--full", action="store_true", help="print the whole AgentOutput, not only its data"
    )
    add_connection_arguments(call)


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Entry point of ``ether call``."""
    import grpc  # imported late: `ether --help` should not load grpc

    from ether.v1 import agent_io_pb2_grpc

    channel, metadata = connect(args)
    agents = agent_io_pb2_grpc.AgentIOServiceStub(channel)
    try:
        return _call(args, agents, metadata, out, err)
    except grpc.RpcError as error:
        code = report_rpc_error(error, err, "ether call")
        if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return EXIT_FAILED  # the task's deadline, not an unreachable host
        return code
    except KeyboardInterrupt:
        return 130
    finally:
        channel.close()


def _call(args: argparse.Namespace, agents: Any, metadata: Any, out: TextIO, err: TextIO) -> int:
    from google.protobuf import json_format

    from ether.v1 import agent_io_pb2

    text = sys.stdin.read() if args.params == "-" else args.params
    try:
        params = json.loads(text)
    except json.JSONDecodeError as error:
        print(f"ether call: params are not JSON: {error}", file=err)
        return EXIT_USAGE
    if not isinstance(params, dict):
        print(f"ether call: params must be a JSON object, not {type(params).__name__}", file=err)
        return EXIT_USAGE
    task = agent_io_pb2.AgentInput(
        agent=args.agent,
        action=args.action,
        task_id=args.task_id,
        params_json=json.dumps(params).encode(),
        output_encoding=agent_io_pb2.DATA_ENCODING_JSON,
    )
    if args.max_cost is not None:
        task.context.budget.max_cost = args.max_cost
    if args.stream:
        output = None
        for event in agents.ExecuteStream(
            agent_io_pb2.ExecuteStreamRequest(input=task), timeout=args.timeout, metadata=metadata
        ):
            kind = event.WhichOneof("event")
            if kind == "output":
                output = event.output
            elif kind == "progress":
                done = f"{event.progress.progress:g}/{event.progress.total:g}"
                print(f"progress {done} {event.progress.message}".rstrip(), file=err)
            elif kind == "log":
                print(f"{event.log.level} {event.log.message}", file=err)
        if output is None:
            print("ether call: the stream ended without an output", file=err)
            return EXIT_FAILED
    else:
        output = agents.Execute(
            agent_io_pb2.ExecuteRequest(input=task), timeout=args.timeout, metadata=metadata
        ).output
    if args.full:
        out.write(json_format.MessageToJson(output, indent=2) + "\n")
    elif output.data_json:
        out.write(json.dumps(json.loads(output.data_json), indent=2, ensure_ascii=False) + "\n")
    if output.status == agent_io_pb2.TASK_STATUS_SUCCESS:
        return EXIT_OK
    if output.HasField("error"):
        print(f"ether call: {output.error.code}: {output.error.message}", file=err)
    return EXIT_PARTIAL if output.status == agent_io_pb2.TASK_STATUS_PARTIAL else EXIT_FAILED
