"""``ether workflow run|watch|resume``: run a workflow spec, attach to a run, or continue an
interrupted one, with live progress (``ls``, ``cancel`` and ``report`` are in cli_runs.py).

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
import time
import uuid
from pathlib import Path
from typing import Any, TextIO

from ether_host import cli_runs
from ether_host.cli_client import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_USAGE,
    add_connection_arguments,
    connect,
    report_rpc_error,
)

MAX_SUCCESS_LINES = 200
RECONNECTS = 5


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
    cli_runs.add_subcommands(actions)
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
    if args.workflow_command in cli_runs.COMMANDS:
        try:
            return cli_runs.run(args, stub, metadata, out, err)
        except grpc.RpcError as error:
            return report_rpc_error(error, err, f"ether workflow {args.workflow_command}")
        finally:
            channel.close()
    view = _View(err, quiet=args.quiet)
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
        try:
            final = _follow(stub, created.id, after, view, metadata)
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
            final = _follow(stub, created.id, view.last_sequence, view, metadata)
        view.stop()
        ended = stub.GetRun(
            workflow_pb2.GetRunRequest(run_id=created.id), timeout=30, metadata=metadata
        ).run
        view.summary(ended)
        if not args.no_report:
            cli_runs.write_report(stub, created.id, args, metadata, out, err)
        return _exit_code(final)
    except grpc.RpcError as error:
        view.stop()
        return report_rpc_error(error, err, "ether workflow")
    finally:
        channel.close()


def _follow(stub: Any, run_id: str, after: int, view: _View, metadata: Any) -> int:
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


class _View:
    """The live display: a progress bar per stage and a status line per finished task (stderr)."""

    def __init__(self, err: TextIO, *, quiet: bool) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = Console(file=err, highlight=False, soft_wrap=True)
        self.quiet = quiet
        self.progress = Progress(
            TextColumn("{task.description:<16}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[state]}"),
            TimeElapsedColumn(),
            console=self.console,
        )
        self.bars: dict[str, Any] = {}
        self.last_sequence = 0
        self.successes = 0
        self.started = False
        self.mapped: set[str] = set()  # stages with a map: their tasks are numbered input.action

    def _start(self) -> None:
        if not self.started and not self.quiet:
            self.progress.start()
            self.started = True

    def stop(self) -> None:
        if self.started:
            self.progress.stop()
            self.started = False

    def note(self, text: str) -> None:
        if not self.quiet:
            self.console.print(f"[yellow]{text}[/]")

    def header(self, run: Any, verb: str) -> None:
        self.mapped = {stage.name for stage in run.spec.stages if len(stage.map) > 0}
        if not self.quiet:
            self.console.print(
                f"[bold]{verb}[/] run [cyan]{run.id}[/] ({run.name or 'unnamed'}): "
                f"{len(run.stages)} stage(s)"
            )
        self._start()

    def _bar(self, stage: str, total: int) -> Any:
        if stage not in self.bars:
            self.bars[stage] = self.progress.add_task(stage, total=max(total, 0), state="running")
        return self.bars[stage]

    def restore(self, run: Any) -> None:
        """Bars for the stages of a run already under way (watch)."""
        from ether.v1 import workflow_pb2

        for stage in run.stages:
            if stage.state == workflow_pb2.STAGE_STATE_PENDING:
                continue
            counts = stage.tasks
            bar = self._bar(stage.name, counts.total)
            self.progress.update(
                bar,
                completed=counts.succeeded + counts.failed + counts.cancelled,
                state=_short(workflow_pb2.StageState.Name(stage.state)),
            )

    def event(self, event: Any) -> None:
        from ether.v1 import workflow_pb2

        self.last_sequence = event.sequence
        kind = event.WhichOneof("event")
        if kind == "stage_started":
            bar = self._bar(event.stage_started.stage, event.stage_started.tasks)
            self.progress.update(bar, total=event.stage_started.tasks, state="running")
        elif kind == "stage_progress":
            counts = event.stage_progress.tasks
            self.progress.update(
                self._bar(event.stage_progress.stage, counts.total), total=counts.total
            )
        elif kind == "stage_completed":
            body = event.stage_completed
            counts = body.tasks
            state = _short(workflow_pb2.StageState.Name(body.state))
            bar = self._bar(body.stage, counts.total)
            done = counts.succeeded + counts.failed + counts.cancelled
            total = counts.total if counts.total else 1
            self.progress.update(
                bar, total=total, completed=done if counts.total else 1, state=_styled(state)
            )
        elif kind == "task_completed":
            self._task_line(event.task_completed.task)
        elif kind == "run_resumed":
            self.note(f"run resumed: {event.run_resumed.tasks_rerun} task(s) run again")

    def _task_line(self, task: Any) -> None:
        from ether.v1 import workflow_pb2

        state = _short(workflow_pb2.RunTaskState.Name(task.state))
        bar = self._bar(task.stage, 0)
        if state != "RETRYING":
            self.progress.advance(bar)
        if self.quiet:
            return
        meta = task.output.metadata
        number = f"#{task.input_index}" + (
            f".{task.action_index}" if task.stage in self.mapped else ""
        )
        where = f"{task.stage:<12} {task.agent}.{task.action} {number}"
        timing = f"{meta.duration.ToTimedelta().total_seconds():.3f}s"
        cost = f" ${meta.cost:g}" if meta.cost else ""
        if state == "SUCCEEDED":
            self.successes += 1
            if self.successes <= MAX_SUCCESS_LINES:
                self.progress.console.print(f"[green]✓[/] {where}  {timing}{cost}")
            elif self.successes == MAX_SUCCESS_LINES + 1:
                self.progress.console.print(
                    "[dim]… further successful tasks are counted in the bars only[/]"
                )
            return
        error = task.output.error
        mark = {"RETRYING": "[yellow]↻[/]", "CANCELLED": "[dim]⊘[/]"}.get(state, "[red]✗[/]")
        detail = f"{error.code}: {error.message}" if error.code else state.lower()
        self.progress.console.print(f"{mark} {where}  {state.lower()}  {detail}")

    def summary(self, run: Any) -> None:
        if self.quiet:
            return
        from ether.v1 import workflow_pb2

        state = _short(workflow_pb2.RunState.Name(run.state))
        counts = run.tasks
        line = (
            f"run [cyan]{run.id}[/] {_styled(state)}: {counts.succeeded} succeeded, {counts.failed} failed, "
            f"{counts.cancelled} cancelled of {counts.total}; cost {run.usage.cost:g}, "
            f"{run.usage.elapsed.ToTimedelta().total_seconds():.2f}s"
        )
        self.console.print(line)
        if run.error.code:
            self.console.print(f"  {run.error.code}: {run.error.message}")


def _short(name: str) -> str:
    return name.split("_STATE_", 1)[-1]


def _styled(state: str) -> str:
    color = {"SUCCEEDED": "green", "PARTIAL": "yellow", "SKIPPED": "dim"}.get(state, "red")
    return f"[{color}]{state}[/]"
