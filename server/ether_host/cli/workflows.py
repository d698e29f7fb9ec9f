"""``ether workflow run|watch|resume``: run a workflow spec, attach to a run, or continue an
interrupted one, with live progress; ``ls``, ``cancel`` and ``report`` the runs the host keeps.

``run`` sends the spec file to WorkflowService.CreateRun, follows the run's
events (a progress bar per stage, a status line per task, all on stderr),
then writes the report (Markdown or JSON) to ``--output`` or stdout.
``watch`` attaches to a run that exists, from its current state; ``resume``
continues an INTERRUPTED run (ResumeRun) and follows it. All three exit
with the run's outcome: 0 succeeded, 3 partial, 1 failed, cancelled or
interrupted, 2 for a bad spec or a usage error; 4 when the host is
unreachable. A dropped stream is resumed from the last event seen.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TextIO

from ether_host.cli import progress
from ether_host.cli.client import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_USAGE,
    add_connection_arguments,
    add_output_argument,
    connect,
    enum_name,
    every_page,
    print_json,
    print_table,
    report_rpc_error,
)

RECONNECTS = 5
RUN_COMMANDS = ("ls", "cancel", "report")
STATES = ("pending", "running", "succeeded", "partial", "failed", "cancelled", "interrupted")


def add_parser(commands: Any) -> None:
    """Register ``workflow run|watch|resume|ls|cancel|report`` on the ``ether`` subparsers."""
    workflow = commands.add_parser("workflow", help="run workflow specs and watch runs")
    workflow.set_defaults(command_parser=workflow)
    actions = workflow.add_subparsers(
        dest="workflow_command",
        required=True,
        parser_class=getattr(commands, "_parser_class", None) or argparse.ArgumentParser,
    )
    run = actions.add_parser(
        "run",
        help="run a workflow spec (YAML or JSON) with live progress, then write its report",
        description="Exit status: 0 succeeded, 3 partial, 1 failed/cancelled/interrupted, 2 bad spec, "
        "4 host unreachable. Ctrl-C cancels the run.",
    )
    run.set_defaults(command_parser=run)
    run.add_argument("spec", help="the workflow spec file (examples/workflows/*.yaml)")
    run.add_argument(
        "--request-id",
        default="",
        help="idempotency key: rerunning with it attaches to the "
        "run it created instead of starting another (default: a new UUID)",
    )
    watch = actions.add_parser("watch", help="attach to a run and follow it to its end")
    watch.set_defaults(command_parser=watch)
    watch.add_argument("run_id", help="the run's id (run-...)")
    resume = actions.add_parser(
        "resume", help="continue an INTERRUPTED run (cut short by a host stop) and follow it"
    )
    resume.set_defaults(command_parser=resume)
    resume.add_argument("run_id", help="the run's id (run-...)")
    resume.add_argument(
        "--include-non-idempotent",
        action="store_true",
        help="also run again the cut-short tasks of actions not marked idempotent",
    )
    _add_run_commands(actions)
    for sub in (run, watch, resume):
        add_connection_arguments(sub)
        sub.add_argument(
            "--format", choices=("md", "json"), default="md", help="report format (default md)"
        )
        sub.add_argument(
            "--output", default="", help="write the report to this file (default: stdout)"
        )
        sub.add_argument(
            "--no-report", action="store_true", help="do not print or write the report"
        )
        sub.add_argument(
            "--quiet", action="store_true", help="no progress display, only the report"
        )


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Entry point of ``ether workflow ...``."""
    import grpc  # imported late: `ether --help` should not load grpc

    from ether.v1 import workflow_pb2, workflow_pb2_grpc

    channel, metadata = connect(args)
    stub = workflow_pb2_grpc.WorkflowServiceStub(channel)
    if args.workflow_command in RUN_COMMANDS:
        try:
            return _runs(args, stub, metadata, out, err)
        except grpc.RpcError as error:
            return report_rpc_error(error, err, f"ether workflow {args.workflow_command}")
        finally:
            channel.close()
    view = progress.RunView(err, quiet=args.quiet)
    try:
        if args.workflow_command == "run":
            try:
                text = Path(args.spec).read_text(encoding="utf-8")
            except OSError as error:
                print(f"ether workflow run: cannot read {args.spec}: {error.strerror}", file=err)
                return EXIT_USAGE
            request = workflow_pb2.CreateRunRequest(
                spec_text=text, request_id=args.request_id or str(uuid.uuid4())
            )
            created = stub.CreateRun(request, timeout=60, metadata=metadata).run
            view.header(created, "started")
            after = 0
        else:
            created = stub.GetRun(
                workflow_pb2.GetRunRequest(run_id=args.run_id), timeout=30, metadata=metadata
            ).run
            after = created.last_sequence  # before resuming: its events follow from here
            if args.workflow_command == "resume":
                created = stub.ResumeRun(
                    workflow_pb2.ResumeRunRequest(
                        run_id=args.run_id,
                        include_non_idempotent=args.include_non_idempotent,
                        request_id=str(uuid.uuid4()),
                    ),
                    timeout=60,
                    metadata=metadata,
                ).run
            view.header(created, "resumed" if args.workflow_command == "resume" else "attached to")
            view.restore(created)
        following = _follow_in_thread(stub, created.id, after, view, metadata)
        try:
            final = following.result()
        except KeyboardInterrupt:
            if args.workflow_command != "run":
                view.stop()
                print(
                    f"detached from {created.id}; it goes on (ether workflow watch {created.id})",
                    file=err,
                )
                return EXIT_FAILED
            stub.CancelRun(
                workflow_pb2.CancelRunRequest(run_id=created.id, reason="interrupted with Ctrl-C"),
                timeout=30,
                metadata=metadata,
            )
            final = following.result()  # the same stream shows the cancel through its end
        view.stop()
        ended = stub.GetRun(
            workflow_pb2.GetRunRequest(run_id=created.id), timeout=30, metadata=metadata
        ).run
        view.summary(ended)
        if not args.no_report:
            _write_report(stub, created.id, args, metadata, out, err)
        return _exit_code(final)
    except grpc.RpcError as error:
        view.stop()
        return report_rpc_error(error, err, "ether workflow")
    finally:
        channel.close()


def _add_run_commands(actions: Any) -> None:
    """Add ``ls``, ``cancel`` and ``report`` to the ``workflow`` command's subparsers."""

    def sub(name: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=text, description=text)
        parser.set_defaults(command_parser=parser)
        add_connection_arguments(parser)
        return parser

    listing = sub("ls", "the runs the host keeps, newest first")
    listing.add_argument("--state", action="append", choices=STATES, default=[], help="repeatable")
    listing.add_argument("--name", default="", help="only runs of workflows with this name")
    add_output_argument(listing)
    cancel = sub("cancel", "cancel a run (its running tasks are cancelled)")
    cancel.add_argument("run_id")
    cancel.add_argument("--reason", default="cancelled from the ether command")
    report = sub("report", "print or write a run's report")
    report.add_argument("run_id")
    report.add_argument("--format", choices=("md", "json"), default="md", help="default md")
    report.add_argument("--output", default="", help="write it to this file (default: stdout)")


def _runs(args: argparse.Namespace, stub: Any, metadata: Any, out: TextIO, err: TextIO) -> int:
    """Run ``ls``, ``cancel`` or ``report``; gRPC errors propagate to the caller."""
    from ether.v1 import workflow_pb2

    if args.workflow_command == "ls":
        request = workflow_pb2.ListRunsRequest(name=args.name)
        for state in args.state:
            request.states.append(getattr(workflow_pb2, f"RUN_STATE_{state.upper()}"))
        runs = every_page(stub.ListRuns, request, "runs", metadata)
        if args.output == "json":
            print_json(runs, out)
        else:
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
    _write_report(stub, args.run_id, args, metadata, out, err)
    return EXIT_OK


def _write_report(
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
            enum_name(workflow_pb2.RunState, r.state),
            f"{r.tasks.succeeded}/{r.tasks.total}",
            r.created_at.ToDatetime().strftime("%Y-%m-%d %H:%M:%S"),
        ]
        for r in runs
    ]
    print_table(header, rows, out)


def _follow_in_thread(
    stub: Any, run_id: str, after: int, view: progress.RunView, metadata: Any
) -> Future[int]:
    """``_follow`` in a thread of its own, its outcome in the future returned. Ctrl-C raises
    KeyboardInterrupt in the main thread only, so it lands in the wait for this future, never
    inside grpc's or rich's code: raised there, it could leave a lock of grpc's channel taken (a
    later call on the channel then hung; seen about once in twenty Ctrl-Cs timed on an event)
    or a line printed twice."""
    outcome: Future[int] = Future()

    def follow() -> None:
        try:
            outcome.set_result(_follow(stub, run_id, after, view, metadata))
        except BaseException as error:  # the main thread reads it from the future
            outcome.set_exception(error)

    threading.Thread(target=follow, name="ether-workflow-follow", daemon=True).start()
    return outcome


def _follow(stub: Any, run_id: str, after: int, view: progress.RunView, metadata: Any) -> int:
    """Feed the run's events to the view until run_completed; the final RunState."""
    import grpc

    from ether.v1 import workflow_pb2

    cursor, failures = after, 0
    while True:
        stream = stub.StreamRunEvents(
            workflow_pb2.StreamRunEventsRequest(run_id=run_id, after_sequence=cursor),
            metadata=metadata,
        )
        try:
            for event in stream:
                failures = 0
                cursor = event.sequence
                view.event(event)
                if event.WhichOneof("event") == "run_completed":
                    return int(event.run_completed.state)
            run = stub.GetRun(
                workflow_pb2.GetRunRequest(run_id=run_id), timeout=30, metadata=metadata
            ).run
            if run.state not in (workflow_pb2.RUN_STATE_PENDING, workflow_pb2.RUN_STATE_RUNNING):
                return int(run.state)
        except grpc.RpcError as error:
            if (
                error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL)
                or failures >= RECONNECTS
            ):
                raise
            failures += 1
            view.note(f"stream lost ({error.code().name}); resuming after event {cursor}")
            time.sleep(min(8.0, 0.5 * 2**failures))
        finally:
            stream.cancel()


def _exit_code(state: int) -> int:
    from ether.v1 import workflow_pb2

    if state == workflow_pb2.RUN_STATE_SUCCEEDED:
        return EXIT_OK
    if state == workflow_pb2.RUN_STATE_PARTIAL:
        return EXIT_PARTIAL
    return EXIT_FAILED
