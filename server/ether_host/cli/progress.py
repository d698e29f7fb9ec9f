"""The live display of ``ether workflow run|watch|resume`` on stderr: a progress bar per stage
and a status line per finished task (rich)."""

from __future__ import annotations

from typing import Any, TextIO

MAX_SUCCESS_LINES = 200


class RunView:
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
