"""AgentIOService: decode, call the dispatcher, encode. No business logic here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import anyio
import grpc

from ether.v1 import agent_io_pb2, agent_io_pb2_grpc, common_pb2
from ether_host import rights
from ether_host.agents import (
    Dispatcher,
    SentBatches,
    TaskEvent,
    TaskInput,
    TaskResult,
    run_pipe,
)
from ether_host.cluster import Cluster
from ether_host.errors import EtherError, FieldViolation, InvalidArgument
from ether_host.notifications import Notifier
from ether_host.reasons import Reason
from ether_host.supervisor import Supervisor
from ether_host.transport import agent_entries, cluster_convert, convert, validation
from ether_host.transport.convert import dict_to_struct, timestamp
from ether_host.transport.interceptors import current_identity


class AgentIOServicer(agent_io_pb2_grpc.AgentIOServiceServicer):
    """The task contract and the agent directory."""

    def __init__(
        self,
        supervisor: Supervisor,
        dispatcher: Dispatcher,
        cluster: Cluster | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self._supervisor = supervisor
        self._dispatcher = dispatcher
        self._cluster = cluster  # with [cluster]: ListAgents and GetAgent show every host's
        self._notifier = notifier  # a task with a notify runs through it (docs/notifications.md)

    async def _execute(
        self,
        task: TaskInput,
        notify: common_pb2.Notify | None,
        on_event: Callable[[TaskEvent], None] | None = None,
    ) -> TaskResult:
        """The task through the dispatcher, or, when the request names where to notify, through
        the notifier, which runs it to its end and delivers its output. ``notify`` is None when
        the request has none: the hot path pays one HasField for the feature."""
        if notify is not None and self._notifier is not None:
            wanted = convert.notify(notify)
            if wanted:
                return await self._notifier.execute(task, wanted, on_event)
        return await self._dispatcher.execute(task, on_event)

    async def ListAgents(
        self, request: agent_io_pb2.ListAgentsRequest, context: grpc.aio.ServicerContext
    ) -> agent_io_pb2.ListAgentsResponse:
        filters = {
            "capability": request.capability,
            "language": _filter(convert.LANGUAGE_NAMES, request.language),
            "kind": _filter(convert.KIND_NAMES, request.type),
        }
        if self._cluster is not None:
            view = await self._cluster.view()
            found = view.list_agents(request.page_size, request.page_token, **filters)
            return agent_io_pb2.ListAgentsResponse(
                agents=[cluster_convert.agent_info(a, view) for a in found.items],
                next_page_token=found.next_page_token,
            )
        page = self._supervisor.list_agents(request.page_size, request.page_token, **filters)
        return agent_entries.list_response(page.items, page.next_page_token)

    async def GetAgent(
        self, request: agent_io_pb2.GetAgentRequest, context: grpc.aio.ServicerContext
    ) -> agent_io_pb2.GetAgentResponse:
        if self._cluster is not None:
            view = await self._cluster.view()
            agent = cluster_convert.agent_info(view.get(request.name), view)
            return agent_io_pb2.GetAgentResponse(agent=agent)
        return agent_io_pb2.GetAgentResponse(
            agent=agent_entries.agent_info(self._supervisor.get(request.name))
        )

    async def Execute(
        self, request: agent_io_pb2.ExecuteRequest, context: grpc.aio.ServicerContext
    ) -> agent_io_pb2.ExecuteResponse:
        message = _required_input(request.input)
        _may_execute(message)
        task = convert.task_input(message, convert.rpc_time_left(context.time_remaining()))
        if request.HasField("notify"):
            result = await self._execute(task, request.notify)
        else:  # the dispatcher straight away: one coroutine less per call
            result = await self._dispatcher.execute(task)  # here, or on a host that runs it
        response = agent_io_pb2.ExecuteResponse()
        convert.fill_agent_output(response.output, result, convert.wants_json(message))
        return response

    # ExecuteStream and Pipe write with context.write instead of yielding: a generator
    # cannot yield from inside a task group (grpc.aio closes it from another task).
    async def ExecuteStream(  # type: ignore[override]
        self, request: agent_io_pb2.ExecuteStreamRequest, context: grpc.aio.ServicerContext
    ) -> None:
        message = _required_input(request.input)
        _may_execute(message)
        task = convert.task_input(message, convert.rpc_time_left(context.time_remaining()))
        as_json = convert.wants_json(message)
        send, receive = anyio.create_memory_object_stream[Any](1000)
        sequence = 0

        async def run() -> None:
            async with send:
                try:
                    notify = request.notify if request.HasField("notify") else None
                    result = await self._execute(task, notify, send.send_nowait)
                    await send.send(result)
                except EtherError as error:
                    await send.send(error)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            async with receive:
                async for item in receive:
                    if isinstance(item, EtherError):
                        raise item
                    sequence += 1
                    await context.write(_stream_event(sequence, task.task_id, item, as_json))

    async def Pipe(  # type: ignore[override]
        self,
        request_iterator: AsyncIterator[agent_io_pb2.PipeRequest],
        context: grpc.aio.ServicerContext,
    ) -> None:
        # The reader sends each message's tasks itself (Dispatcher.send_batch), so the stream
        # owns the tasks in flight: when it goes away first, their agents get cancel frames.
        sent = SentBatches()

        def run_batch(
            items: list[_PipeTask],
            answer: Callable[[_Answer], None],
            group: asyncio.TaskGroup,
        ) -> Awaitable[None] | None:
            """The tasks of a message that have a slot, through the dispatcher's batch path:
            checked and sent together, each answered as it ends. An input that breaks the
            rules, or a task the dispatcher refuses, is answered alone; the others run."""
            time_left = convert.rpc_time_left(context.time_remaining())
            messages: list[agent_io_pb2.AgentInput] = []
            tasks: list[TaskInput] = []
            for request, index in items:
                message = request.input if index < 0 else request.inputs[index]
                try:
                    if index < 0:
                        _check_pipe_input(request)  # the rules Execute's input is checked against
                    else:
                        _check_batch_input(message, index)  # the same, named inputs[index]
                except InvalidArgument as error:
                    answer(_invalid_output(message, error))
                    continue
                try:
                    _may_execute(message)
                    tasks.append(convert.task_input(message, time_left))
                except EtherError as error:
                    answer(convert.error_output(message, error.reason.lower(), error.message))
                    continue
                messages.append(message)

            def done(position: int, outcome: TaskResult | EtherError) -> None:
                message = messages[position]
                if isinstance(outcome, EtherError):
                    output = convert.error_output(message, outcome.reason.lower(), outcome.message)
                    output.task_id = tasks[position].task_id
                    answer(output)
                else:  # encoded straight into the response by write()
                    answer((outcome, convert.wants_json(message)))

            return self._dispatcher.send_batch(tasks, done, group, sent)

        batched = False  # the first request decides: batches answered in batches

        async def write(outputs: list[_Answer]) -> None:
            if batched:
                response = agent_io_pb2.PipeResponse()
                for item in outputs:
                    if isinstance(item, tuple):
                        convert.fill_agent_output(response.outputs.add(), *item)
                    else:
                        response.outputs.append(item)
                await context.write(response)
                return
            for item in outputs:
                response = agent_io_pb2.PipeResponse()
                if isinstance(item, tuple):
                    convert.fill_agent_output(response.output, *item)
                else:
                    response.output.CopyFrom(item)
                await context.write(response)

        def answers_batched(request: agent_io_pb2.PipeRequest) -> bool:
            nonlocal batched
            batched = len(request.inputs) > 0
            return batched

        # The flow control (in-flight slots counted in tasks, one write at a time) is the
        # core's: agents/pipe.py.
        try:
            await run_pipe(
                request_iterator,
                None,  # every task goes through run_batch
                write,
                lambda r: r.max_in_flight,
                _pipe_tasks,
                answers_batched,
                run_batch=run_batch,
            )
        finally:
            sent.abandon()

    async def CancelTask(
        self, request: agent_io_pb2.CancelTaskRequest, context: grpc.aio.ServicerContext
    ) -> agent_io_pb2.CancelTaskResponse:
        self._dispatcher.cancel(request.task_id, request.reason)
        return agent_io_pb2.CancelTaskResponse(cancelled=True)


# The check the interceptor leaves to Pipe (validation.ANSWERED_IN_STREAM), so a bad input is
# answered in the stream with the message Execute's status would carry, and the stream goes on.
_check_pipe_input = validation.field_checker(
    agent_io_pb2.PipeRequest.DESCRIPTOR,  # type: ignore[arg-type] # upb's own class
    "input",
)


# One task of a Pipe request: the request and the index of its input in ``inputs``, or -1 for
# ``input`` (kept as the request, so the check names the field as Execute's does).
_PipeTask = tuple[agent_io_pb2.PipeRequest, int]

# An answer on its way to the stream: an AgentOutput built already (an input refused), or a
# result with its encoding, filled into the response's own message when written (no copy).
_Answer = agent_io_pb2.AgentOutput | tuple[TaskResult, bool]

_check_batch_input = validation.element_checker(
    agent_io_pb2.PipeRequest.DESCRIPTOR,  # type: ignore[arg-type] # upb's own class
    "inputs",
)
_MAX_BATCH = validation.max_items(
    agent_io_pb2.PipeRequest.DESCRIPTOR,  # type: ignore[arg-type] # upb's own class
    "inputs",
)


def _pipe_tasks(request: agent_io_pb2.PipeRequest) -> list[_PipeTask]:
    """The tasks of one Pipe request: ``input`` (when set, or when nothing is: its check then
    answers that it is required), then each of ``inputs``. A batch over its bound concerns the
    message as a whole, so it ends the stream."""
    count = len(request.inputs)
    if not count:  # one task per message (most streams): the list below, without its steps
        return [(request, -1)]
    if count > _MAX_BATCH:
        raise InvalidArgument(
            f"inputs has {count} items; at most {_MAX_BATCH}: split the batch",
            reason=Reason.INVALID_FIELD,
            metadata={"fields": "inputs"},
            violations=[FieldViolation("inputs", f"has {count} items; at most {_MAX_BATCH}")],
        )
    tasks: list[_PipeTask] = [(request, -1)] if request.HasField("input") or not count else []
    tasks.extend((request, index) for index in range(count))
    return tasks


def _invalid_output(
    message: agent_io_pb2.AgentInput, error: InvalidArgument
) -> agent_io_pb2.AgentOutput:
    """The in-stream answer to an input that breaks the rules: code invalid_argument, the
    message of Execute's INVALID_ARGUMENT, and in details the reason and field violations."""
    output = convert.error_output(message, "invalid_argument", error.message)
    output.error.details.CopyFrom(
        dict_to_struct(
            {
                "reason": error.reason,
                "field_violations": [
                    {"field": v.field, "description": v.description} for v in error.violations
                ],
            }
        )
    )
    return output


def _filter(names: Mapping[Any, str], value: int) -> str:
    """An enum filter as the core's name: '' for unset (0), and a value with no name as a name
    no agent has, so that it matches none (as comparing the enum values did)."""
    return names.get(value, f"#{value}") if value else ""


def _may_execute(message: agent_io_pb2.AgentInput) -> None:
    """PERMISSION_DENIED unless the caller holds agent.execute, or agent.execute:<agent> for
    the agent this input names (the interceptor let in a caller with it for some agent)."""
    rights.require(current_identity.get(), rights.AGENT_EXECUTE, message.agent)


def _required_input(message: agent_io_pb2.AgentInput) -> agent_io_pb2.AgentInput:
    if not message.agent:
        raise InvalidArgument(
            "input.agent is required: name the agent to run (see ListAgents)",
            reason=Reason.MISSING_AGENT,
        )
    return message


def _stream_event(
    sequence: int, task_id: str, item: Any, as_json: bool
) -> agent_io_pb2.ExecuteStreamResponse:
    event = agent_io_pb2.ExecuteStreamResponse(sequence=sequence, task_id=task_id)
    if isinstance(item, TaskEvent):
        event.time.CopyFrom(timestamp(item.time))
        payload = item.payload
        if item.kind == "started":
            event.started.CopyFrom(
                agent_io_pb2.TaskStarted(pid=payload["pid"], attempt=payload["attempt"])
            )
        elif item.kind == "progress":
            event.progress.CopyFrom(
                agent_io_pb2.TaskProgress(
                    progress=float(payload.get("progress") or 0),
                    total=float(payload.get("total") or 0),
                    message=str(payload.get("message") or ""),
                )
            )
        else:
            event.log.CopyFrom(
                agent_io_pb2.TaskLog(
                    level=str(payload.get("level") or "info"),
                    message=str(payload.get("msg") or ""),
                    fields=dict_to_struct(payload.get("fields") or {}),
                )
            )
        return event
    convert.fill_agent_output(event.output, item, as_json)
    return event
