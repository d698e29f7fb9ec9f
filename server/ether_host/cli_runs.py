"""``ether workflow ls|cancel|report``: the runs a host keeps, without following one.

(``run``, ``watch`` and ``resume``, which follow a run live, are in cli_workflow.py.)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from ether_host.cli_client import EXIT_OK, add_connection_arguments, print_table

COMMANDS = ("ls", "cancel", "report")
STATES = ("pending", "running", "succeeded", "partial", "failed", "cancelled", "interrupted")


def add_subcommands(actions: Any) -> None:
    """Add ``ls``, ``cancel`` and ``report`` to the ``workflow`` command's subparsers."""

    def sub(name: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=text, description=text)
        parser.set_defaults(command_parser=parser)
        add_connection_arguments(parser)
        return parser

    listing = sub("ls", "the runs the host keeps, newest first")
    listing.add_argument("--state", action="append", choices=STATES, default=[], help="repeatable")
    listing.add_argument("--name", default="", help="only runs of workflows with this name")
    cancel = sub("cancel", "cancel a run (its running tasks are cancelled)")
    cancel.add_argument("run_id")
    cancel.add_argument("--reason", default="cancelled from the ether command")
    report = sub("report", "print or write a run's report")
    report.add_argument("run_id")
    report.add_argument("--format", choices=("md", "json"), default="md", help="default md")
    report.add_argument("--output", default="", help="write it to this file (default: stdout)")


def run(args: argparse.Namespace, stub: Any, metadata: Any, out: TextIO, err: TextIO) -> int:
    """Run ``ls``, ``cancel`` or ``report``; gRPC errors propagate to the caller."""
    from ether.v1 import workflow_pb2

    if args.workflow_command == "ls":
        request = workflow_pb2.ListRunsRequest(name=args.name)
        for state in args.state:
            request.states.append(getattr(workflow_pb2, f"RUN_STATE_{state.upper()}"))
        runs: list[Any] = []
        while True:
            page = stub.ListRuns(request, timeout=30, metadata=metadata)
            runs.extend(page.runs)
            if not page.next_page_token:
                break
            request.page_token = page.next_page_token
        _table(runs, out)
        return EXIT_OK
    if args.workflow_command == "cancel":
        cancelled = stub.CancelRun(
            workflow_pb2.CancelRunRequest(run_id=args.run_id, reason=args.reason),
            timeout=60,
            metadata=metadata,
        ).run
        state = workflow_pb2.RunState.Name(cancelled.state).removeprefix("RUN_STATE_")
        print(f"{cancelled.id}: {state}", file=out)
        return EXIT_OK
    write_report(stub, args.run_id, args, metadata, out, err)
    return EXIT_OK


def write_report(
    stub: Any, run_id: str, args: argparse.Namespace, metadata: Any, out: TextIO, err: TextIO
) -> None:
    """The run's report in ``args.format``, to ``args.output`` or to ``out``."""
    from ether.v1 import workflow_pb2

    fmt = (
        workflow_pb2.REPORT_FORMAT_JSON
        if args.format == "json"
        else workflow_pb2.REPORT_FORMAT_MARKDOWN
    )
    content = stub.GetRunReport(
        workflow_pb2.GetRunReportRequest(run_id=run_id, format=fmt), timeout=60, metadata=metadata
    ).content
    if args.output:
        Path(args.output).write_text(content, encoding="utf-8")
        print(f"report written to {args.output}", file=err)
    else:
        out.write(content)


def _table(runs: list[Any], out: TextIO) -> None:
    from ether.v1 import workflow_pb2

    header = ["ID", "NAME", "STATE", "TASKS", "CREATED"]
    rows = [
        [
            r.id,
            r.name,
            workflow_pb2.RunState.Name(r.state).removeprefix("RUN_STATE_"),
            f"{r.tasks.succeeded}/{r.tasks.total}",
            r.created_at.ToDatetime().strftime("%Y-%m-%d %H:%M:%S"),
        ]
        for r in runs
    ]
    print_table(header, rows, out)
