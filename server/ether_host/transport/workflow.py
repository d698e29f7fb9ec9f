"""WorkflowService: decode, call the workflow use cases, encode. No business logic here.

The core speaks the API's JSON shapes (proto3 JSON mapping), so encoding is
``ParseDict`` and decoding a spec message is ``MessageToDict``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from ether.v1 import workflow_pb2, workflow_pb2_grpc
from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.lifecycle import Lifecycle
from ether_host.notifications import Notifier
from ether_host.reasons import Reason
from ether_host.transport.convert import integral, notify, seconds
from ether_host.transport.interceptors import current_identity
from ether_host.transport.struct_values import (
    fill_struct_or_note,
    fill_value_or_note,
    fill_values,
    values_of,
)
from ether_host.workflows import Workflows, check_spec_size

M = TypeVar("M", bound=Message)
FORMATS = {workflow_pb2.REPORT_FORMAT_JSON: "json", workflow_pb2.REPORT_FORMAT_MARKDOWN: "markdown"}


def _message(body: dict[str, Any], message: M) -> M:
    json_format.ParseDict(body, message, ignore_unknown_fields=True)
    return message


def _run(body: dict[str, Any]) -> workflow_pb2.Run:
    """A run's JSON as a Run message. Its two lists that grow with the run, each stage's inputs
    and the result, are filled by struct_values' Value conversion (each stage's inputs in one
    step): through ParseDict they cost ~6 µs per task of a 10,000-task map in CreateRun and
    WaitRun (bench/RESULTS.md, "Batching"); the rest goes through ParseDict."""
    lean = dict(body)
    result = lean.pop("result", _ABSENT)
    spec = lean.get("spec")
    stages = spec.get("stages") if isinstance(spec, dict) else None
    inputs: list[Any] = []
    if (
        isinstance(spec, dict)
        and isinstance(stages, list)
        and any(isinstance(s, dict) and s.get("inputs") for s in stages)
    ):
        inputs = [s.get("inputs") if isinstance(s, dict) else None for s in stages]
        lean["spec"] = {
            **spec,
            "stages": [
                {k: v for k, v in s.items() if k != "inputs"} if isinstance(s, dict) else s
                for s in stages
            ],
        }
    run = _message(lean, workflow_pb2.Run())
    for stage, items in zip(run.spec.stages, inputs, strict=False):
        if items:
            fill_values(stage, "inputs", items)
    if result is not _ABSENT:
        fill_value_or_note(run.result, result, "the run's result")
    return run


_ABSENT = object()


def _run_task(body: dict[str, Any], task: workflow_pb2.RunTask) -> workflow_pb2.RunTask:
    """A task's JSON as a RunTask, filled in place. Its params and its output's Values and
    Structs (data, metadata.extra, error.details, each proposal's params) come from an agent,
    so one may nest deeper than protobuf's decoders read: each is filled by the depth-checked
    writer, and one too deep is replaced in its place by a text saying so
    (docs/limits.md) -- through ParseDict it made the whole page, or the event stream, INTERNAL."""
    lean = dict(body)
    params = lean.pop("params", None)
    output = lean.get("output")
    if isinstance(output, dict):
        lean["output"] = _without_agent_values(output)
    _message(lean, task)
    if isinstance(params, dict):
        fill_struct_or_note(task.params, params, "the task's params")
    if not isinstance(output, dict):
        return task
    if "data" in output:
        fill_value_or_note(task.output.data, output["data"], "the task's data")
    extra = _inner(output, "metadata", "extra")
    if isinstance(extra, dict):
        fill_struct_or_note(task.output.metadata.extra, extra, "the task's metadata.extra")
    details = _inner(output, "error", "details")
    if isinstance(details, dict):
        fill_struct_or_note(task.output.error.details, details, "the task's error details")
    proposals = output.get("next_actions")
    for index, proposal in enumerate(proposals if isinstance(proposals, list) else []):
        if isinstance(proposal, dict) and isinstance(proposal.get("params"), dict):
            what = f"the params of the task's next action {index}"
            fill_struct_or_note(task.output.next_actions[index].params, proposal["params"], what)
    return task


def _without_agent_values(output: dict[str, Any]) -> dict[str, Any]:
    """A task output's JSON without the Values and Structs _run_task fills itself."""
    lean = {key: value for key, value in output.items() if key != "data"}
    for part, key in (("metadata", "extra"), ("error", "details")):
        inner = lean.get(part)
        if isinstance(inner, dict):
            lean[part] = {k: v for k, v in inner.items() if k != key}
    proposals = lean.get("next_actions")
    if isinstance(proposals, list):
        lean["next_actions"] = [
            {k: v for k, v in p.items() if k != "params"} if isinstance(p, dict) else p
            for p in proposals
        ]
    return lean


def _inner(output: dict[str, Any], part: str, key: str) -> Any:
    inner = output.get(part)
    return inner.get(key) if isinstance(inner, dict) else None


def _event(body: dict[str, Any]) -> workflow_pb2.StreamRunEventsResponse:
    """A run event's JSON as a message; a task in it (started, completed) as _run_task fills
    it."""
    for kind in ("task_started", "task_completed"):
        payload = body.get(kind)
        if isinstance(payload, dict) and isinstance(payload.get("task"), dict):
            event = _message({**body, kind: {}}, workflow_pb2.StreamRunEventsResponse())
            _run_task(payload["task"], getattr(event, kind).task)
            return event
    return _message(body, workflow_pb2.StreamRunEventsResponse())


def _spec(message: workflow_pb2.WorkflowSpec) -> dict[str, Any]:
    """A spec message as the core's JSON. Each stage's inputs (a 10,000-task map's 10,000
    Values) are read by struct_values' Value conversion in one step, many times faster than
    through MessageToDict; the rest goes through MessageToDict. An input that is NaN or infinite is
    then refused by the spec's checks, naming it (``stages[0].inputs[3]``)."""
    whole = not any(stage.inputs for stage in message.stages)
    lean = message if whole else workflow_pb2.WorkflowSpec()
    if not whole:
        lean.CopyFrom(message)
        for stage in lean.stages:
            del stage.inputs[:]
    spec: dict[str, Any] = integral(
        json_format.MessageToDict(lean, preserving_proto_field_name=True)
    )
    if whole:
        return spec
    for raw, stage in zip(spec.get("stages") or [], message.stages, strict=True):
        if stage.inputs:
            raw["inputs"] = values_of(stage, "inputs")
    return spec


class WorkflowServicer(workflow_pb2_grpc.WorkflowServiceServicer):
    """Runs of declarative workflows."""

    def __init__(
        self, workflows: Workflows, lifecycle: Lifecycle, notifier: Notifier | None = None
    ) -> None:
        self._workflows = workflows
        self._lifecycle = lifecycle
        self._notifier = notifier  # a run with a notify is watched to its end by it

    async def CreateRun(
        self, request: workflow_pb2.CreateRunRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> workflow_pb2.CreateRunResponse:
        source = request.WhichOneof("spec_source")
        spec = None
        if source == "spec":
            check_spec_size(request.spec.ByteSize(), "spec")  # before anything is decoded
            try:
                spec = _spec(request.spec)
            except json_format.SerializeToJsonError as error:  # NaN or infinity in a Value
                raise InvalidArgument(
                    f"spec: {error}",
                    reason=Reason.INVALID_WORKFLOW,
                    violations=[FieldViolation("spec", f"{error}: numbers must be finite")],
                ) from None
        wanted = notify(request.notify)
        notifier = self._notifier if wanted else None
        if notifier is not None:
            notifier.check(wanted)  # a bad notify creates no run

        async def watch(run_id: str) -> None:
            # Only for the run this request created: a repeat of its request_id keeps the first
            # request's notify, and watched again, a run that had ended was delivered again.
            if notifier is not None:
                await notifier.watch_run(run_id, wanted)

        run = await self._workflows.create(
            spec,
            request.spec_text if source == "spec_text" else None,
            request_id=request.request_id,
            validate_only=request.validate_only,
            creator=current_identity.get().name,
            on_created=watch,
        )
        return workflow_pb2.CreateRunResponse(run=_run(run))

    async def GetRun(
        self, request: workflow_pb2.GetRunRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> workflow_pb2.GetRunResponse:
        return workflow_pb2.GetRunResponse(run=_run(await self._workflows.get(request.run_id)))

    async def ListRuns(
        self, request: workflow_pb2.ListRunsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> workflow_pb2.ListRunsResponse:
        states = [
            workflow_pb2.RunState.Name(s).removeprefix("RUN_STATE_") for s in request.states if s
        ]
        runs, token = await self._workflows.list_runs(
            request.page_size, request.page_token, states, request.name
        )
        return workflow_pb2.ListRunsResponse(runs=[_run(r) for r in runs], next_page_token=token)

    async def ListRunTasks(
        self, request: workflow_pb2.ListRunTasksRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> workflow_pb2.ListRunTasksResponse:
        state = (
            workflow_pb2.RunTaskState.Name(request.state).removeprefix("RUN_TASK_STATE_")
            if request.state
            else ""
        )
        tasks, token = await self._workflows.list_tasks(
            request.run_id, request.page_size, request.page_token, request.stage, state
        )
        return workflow_pb2.ListRunTasksResponse(
            tasks=[_run_task(t, workflow_pb2.RunTask()) for t in tasks], next_page_token=token
        )

    async def CancelRun(
        self, request: workflow_pb2.CancelRunRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> workflow_pb2.CancelRunResponse:
        notifier = self._notifier

        async def deliver_the_end() -> None:
            # Only when this request cancelled a run a host restart had left INTERRUPTED:
            # nothing here waits for that run's end any more (its watch ended at INTERRUPTED),
            # and the next host to start delivered it. Watched again (run_resumed), it is
            # delivered CANCELLED now and its notify let go: no later host delivers it again.
            if notifier is not None:
                await notifier.run_resumed(request.run_id)

        run = await self._workflows.cancel(request.run_id, request.reason, deliver_the_end)
        return workflow_pb2.CancelRunResponse(run=_run(run))

    async def WaitRun(
        self, request: workflow_pb2.WaitRunRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> workflow_pb2.WaitRunResponse:
        limit = seconds(request.timeout) if request.HasField("timeout") else None
        if limit is not None and limit < 0:
            raise InvalidArgument(
                "timeout must not be negative",
                reason=Reason.INVALID_TIMEOUT,
                violations=[FieldViolation("timeout", "must not be negative")],
            )
        return workflow_pb2.WaitRunResponse(
            run=_run(await self._workflows.wait(request.run_id, limit))
        )

    async def StreamRunEvents(
        self,
        request: workflow_pb2.StreamRunEventsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[workflow_pb2.StreamRunEventsResponse]:
        events = self._workflows.events(
            request.run_id,
            request.after_sequence,
            request.exclude_task_details,
            lambda: self._lifecycle.is_stopping,
        )
        async for event in events:
            yield _event(event)

    async def ResumeRun(
        self, request: workflow_pb2.ResumeRunRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> workflow_pb2.ResumeRunResponse:
        notifier = self._notifier

        async def watch_again() -> None:
            # Only when this request resumed the run, not for a repeat of its request_id.
            if notifier is not None:
                await notifier.run_resumed(request.run_id)

        run = await self._workflows.resume(
            request.run_id, request.include_non_idempotent, request.request_id, watch_again
        )
        return workflow_pb2.ResumeRunResponse(run=_run(run))

    async def GetRunReport(
        self, request: workflow_pb2.GetRunReportRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> workflow_pb2.GetRunReportResponse:
        fmt = FORMATS.get(request.format)
        if fmt is None:
            raise InvalidArgument(
                "format is required: REPORT_FORMAT_JSON or REPORT_FORMAT_MARKDOWN",
                reason=Reason.INVALID_FORMAT,
                violations=[
                    FieldViolation("format", "REPORT_FORMAT_JSON or REPORT_FORMAT_MARKDOWN")
                ],
            )
        content, content_type, state = await self._workflows.report(request.run_id, fmt)
        return workflow_pb2.GetRunReportResponse(
            content=content,
            content_type=content_type,
            format=request.format,
            run_state=f"RUN_STATE_{state}",
        )
