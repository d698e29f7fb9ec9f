"""A2A's RequestHandler over Ether's core: every A2A method of both bindings lands here.

a2a-sdk's GrpcHandler (gRPC) and JsonRpcDispatcher (JSON-RPC) decode a request and call this;
it calls the same core faces as AgentIOService (``Dispatcher.execute`` and ``cancel``,
``Supervisor.get``, ``rights.require``) and copies none of their policy. The SDK's own
DefaultRequestHandler is not used: it serves one agent card per handler, runs tasks in asyncio
tasks no task group owns, and refuses SubscribeToTask on a finished task instead of yielding
its final state.

An A2A task runs in this handler's task group, not in the RPC's: a client that goes away does
not cancel it (CancelTask does), so it can come back with GetTask or SubscribeToTask. Its
deadline is the call's time left, else the host's ``default_deadline``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncGenerator

import anyio
import structlog
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import (
    apply_history_length,
    decode_page_token,
    encode_page_token,
    validate_history_length,
    validate_page_size,
)
from anyio.abc import TaskGroup, TaskStatus

from ether_host import rights
from ether_host.a2a import messages
from ether_host.a2a.cards import Endpoints, extended_card
from ether_host.a2a.tasks import A2ATask, TaskBook
from ether_host.agents import ERROR, Dispatcher, TaskEvent, TaskInput
from ether_host.auth import LOCAL, Identity
from ether_host.background import start_detached
from ether_host.errors import Cancelled, EtherError, NotFound
from ether_host.supervisor import ActionInfo, ManagedAgent, Supervisor

log = structlog.get_logger("ether.a2a")

IDENTITY = "ether.identity"  # ServerCallContext.state: the caller, set by each binding
TIME_LEFT = "ether.time_left"  # ServerCallContext.state: the call's seconds left, when it has any
PATH_TENANT = "ether.path_tenant"  # ServerCallContext.state: the agent of a JSON-RPC URL
CANCEL_WAIT = 10.0  # seconds CancelTask waits for the task to end before answering


class EtherRequestHandler(RequestHandler):
    """Every Ether agent as an A2A agent, addressed by its name as ``tenant``."""

    def __init__(
        self, supervisor: Supervisor, dispatcher: Dispatcher, default_deadline: float
    ) -> None:
        self._supervisor = supervisor
        self._dispatcher = dispatcher
        self._default_deadline = default_deadline
        self._book = TaskBook()
        self._tg: TaskGroup | None = None
        self.endpoints = Endpoints()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the A2A tasks' runs until cancelled (the host's stop)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    # -- messages --------------------------------------------------------------------------

    async def on_message_send(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> a2a_pb2.Task:
        record = await self._start(params, context)
        if not params.configuration.return_immediately:
            await record.wait()
        return apply_history_length(record.snapshot(), params.configuration)

    async def on_message_send_stream(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        record = await self._start(params, context)
        async for event in record.follow():
            yield event

    async def _start(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> A2ATask:
        """Check the message, start its task and return it once the dispatcher took it."""
        identity = _identity(context)
        tenant = self._tenant(params.tenant, context)
        rights.require(identity, rights.AGENT_EXECUTE, tenant)
        validate_history_length(params.configuration)
        if params.message.task_id:
            self._refuse_follow_up(params.message.task_id, identity)
        agent = self._agent(tenant)
        skill = messages.skill_of(params)
        payload = messages.params_of(params.message, _action(agent, skill))
        task_id = "a2a-" + secrets.token_hex(16)
        time_left = context.state.get(TIME_LEFT)
        seconds = self._default_deadline if time_left is None else time_left
        task = TaskInput(
            agent=tenant,
            action=skill,
            params=payload,
            task_id=task_id,
            deadline=time.monotonic() + seconds if seconds else None,
        )
        record = self._book.add(messages.new_task(params.message, task_id), tenant, identity.name)
        assert self._tg is not None, "EtherRequestHandler.run is not running"
        taken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        start_detached(self._tg, self._run, record, task, taken, name=f"a2a task {task_id}")
        await taken
        if record.refused is not None:
            raise record.refused  # _run has forgotten the task
        record.admitted = True
        return record

    async def _run(self, record: A2ATask, task: TaskInput, taken: asyncio.Future[None]) -> None:
        """Run one task to its end and record each step as the task's status and artifacts."""

        def on_event(event: TaskEvent) -> None:
            payload = event.payload
            if event.kind == "started":
                record.set_status(
                    a2a_pb2.TASK_STATE_WORKING,
                    metadata={"pid": payload.get("pid"), "attempt": payload.get("attempt")},
                )
            elif event.kind == "progress":
                progress = {"progress": payload.get("progress"), "total": payload.get("total")}
                text = str(payload.get("message") or "")
                record.set_status(
                    a2a_pb2.TASK_STATE_WORKING,
                    messages.agent_message(record.task, text, progress),
                )

        # The dispatcher checks a task (agent, action, params) before its first await: with the
        # future set first, the waiting _start wakes only after execute has either refused the
        # task (raised here, at once) or taken it, so a refusal is the message's A2A error and
        # not a task that failed.
        taken.set_result(None)
        try:
            result = await self._dispatcher.execute(task, on_event)
        except Cancelled as cancelled:
            record.set_status(
                a2a_pb2.TASK_STATE_CANCELED, messages.agent_message(record.task, cancelled.message)
            )
            return
        except EtherError as error:
            refusal = messages.refusal(error)
            if not record.admitted and refusal is not None:
                # Forgotten here, not by _start: its caller may be gone by now.
                record.refused = refusal
                self._book.discard(record)
                return
            never_started = record.task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
            state = a2a_pb2.TASK_STATE_REJECTED if never_started else a2a_pb2.TASK_STATE_FAILED
            data = {"error": {"code": error.reason.lower(), "message": error.message}}
            record.set_status(state, messages.agent_message(record.task, error.message, data))
            return
        except Exception:
            log.exception("a2a task crashed", task_id=task.task_id, agent=task.agent)
            record.set_status(
                a2a_pb2.TASK_STATE_FAILED,
                messages.agent_message(record.task, "the host failed to run the task (logged)"),
            )
            return
        artifact = messages.output_artifact(result)
        if artifact is not None:
            record.add_artifact(artifact)
        messages.set_metadata(record.task, messages.result_metadata(result))
        if result.status == ERROR:
            error_data = messages.error_data(result)
            record.set_status(
                a2a_pb2.TASK_STATE_FAILED,
                messages.agent_message(record.task, error_data["message"], {"error": error_data}),
            )
        else:
            record.set_status(a2a_pb2.TASK_STATE_COMPLETED)

    def _refuse_follow_up(self, task_id: str, identity: Identity) -> None:
        record = self._book.get(task_id, identity.name)
        if record is None:
            raise TaskNotFoundError(message=f"no task {task_id!r} of yours on this host")
        raise UnsupportedOperationError(
            message=f"task {task_id} takes no further messages: an Ether action runs once per "
            "message; send a new message without task_id"
        )

    # -- tasks -----------------------------------------------------------------------------

    async def on_get_task(
        self, params: a2a_pb2.GetTaskRequest, context: ServerCallContext
    ) -> a2a_pb2.Task:
        validate_history_length(params)
        record = self._find(params.id, params.tenant, context)
        return apply_history_length(record.snapshot(), params)

    async def on_list_tasks(
        self, params: a2a_pb2.ListTasksRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTasksResponse:
        """The caller's tasks, newest first, of the agents it may run (of ``tenant`` alone when
        given); the page token is the position of the last task of the page."""
        identity = _identity(context)
        tenant = params.tenant or context.state.get(PATH_TENANT, "")
        validate_history_length(params)
        size = DEFAULT_LIST_TASKS_PAGE_SIZE
        if params.HasField("page_size"):
            validate_page_size(params.page_size)
            size = params.page_size
        after = _position(params.page_token) if params.page_token else None
        since = params.status_timestamp_after if params.HasField("status_timestamp_after") else None
        matching = [
            record
            for record in self._book.newest_first(identity.name)
            if (not tenant or record.tenant == tenant)
            and identity.may(rights.AGENT_EXECUTE, record.tenant)
            and (not params.context_id or record.task.context_id == params.context_id)
            and (not params.status or record.task.status.state == params.status)
            and (
                since is None
                or record.task.status.timestamp.ToNanoseconds() > since.ToNanoseconds()
            )
        ]
        remaining = [r for r in matching if after is None or r.number < after]
        page = remaining[:size]
        response = a2a_pb2.ListTasksResponse(page_size=size, total_size=len(matching))
        for record in page:
            task = apply_history_length(record.snapshot(), params)
            if not params.include_artifacts:
                task.ClearField("artifacts")
            response.tasks.append(task)
        if len(remaining) > size:
            response.next_page_token = encode_page_token(str(page[-1].number))
        return response

    async def on_cancel_task(
        self, params: a2a_pb2.CancelTaskRequest, context: ServerCallContext
    ) -> a2a_pb2.Task:
        record = self._find(params.id, params.tenant, context)
        if record.finished:
            state = a2a_pb2.TaskState.Name(record.task.status.state).removeprefix("TASK_STATE_")
            raise TaskNotCancelableError(
                message=f"task {record.id} has ended ({state}); only a running task can be cancelled"
            )
        with contextlib.suppress(NotFound):  # ended meanwhile: its final state is the answer
            self._dispatcher.cancel(record.id, "cancelled through A2A CancelTask")
        with anyio.move_on_after(CANCEL_WAIT):
            await record.wait()
        return record.snapshot()

    async def on_subscribe_to_task(
        self, params: a2a_pb2.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        record = self._find(params.id, params.tenant, context)
        async for event in record.follow():
            yield event

    def _find(self, task_id: str, tenant: str, context: ServerCallContext) -> A2ATask:
        """The caller's task ``task_id`` (of ``tenant`` when given), which it may still run."""
        identity = _identity(context)
        tenant = tenant or context.state.get(PATH_TENANT, "")
        record = self._book.get(task_id, identity.name)
        if record is None or (tenant and record.tenant != tenant):
            where = f" of agent {tenant!r}" if tenant else ""
            raise TaskNotFoundError(
                message=f"no task {task_id!r}{where} of yours on this host (finished tasks are "
                "kept for an hour)"
            )
        rights.require(identity, rights.AGENT_EXECUTE, record.tenant)
        return record

    # -- cards -----------------------------------------------------------------------------

    async def on_get_extended_agent_card(
        self, params: a2a_pb2.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> a2a_pb2.AgentCard:
        tenant = self._tenant(params.tenant, context)
        rights.require(_identity(context), rights.AGENT_EXECUTE, tenant)
        return extended_card(self._agent(tenant), self.endpoints)

    # -- push notifications: not offered (the cards say push_notifications false) ----------

    async def on_create_task_push_notification_config(
        self, params: a2a_pb2.TaskPushNotificationConfig, context: ServerCallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        raise _NO_PUSH

    async def on_get_task_push_notification_config(
        self, params: a2a_pb2.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        raise _NO_PUSH

    async def on_list_task_push_notification_configs(
        self, params: a2a_pb2.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        raise _NO_PUSH

    async def on_delete_task_push_notification_config(
        self, params: a2a_pb2.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise _NO_PUSH

    # -- helpers ---------------------------------------------------------------------------

    def _tenant(self, tenant: str, context: ServerCallContext) -> str:
        in_path = context.state.get(PATH_TENANT, "")
        if in_path and tenant and tenant != in_path:
            raise InvalidParamsError(
                message=f"tenant {tenant!r} differs from the agent of the URL ({in_path!r})"
            )
        tenant = tenant or in_path
        if not tenant:
            raise InvalidParamsError(
                message="tenant is required: the name of the Ether agent to talk to (each "
                "agent's card names it in supported_interfaces)"
            )
        return tenant

    def agent(self, name: str) -> ManagedAgent:
        """Agent ``name`` (NOT_FOUND naming the deployed ones): for the HTTP card routes."""
        return self._supervisor.get(name)

    def directory(self) -> list[ManagedAgent]:
        """Every agent, by name, through the core's list (all pages)."""
        agents: list[ManagedAgent] = []
        token = ""
        while True:
            page = self._supervisor.list_agents(1000, token)
            agents.extend(page.items)
            token = page.next_page_token
            if not token:
                return agents

    def _agent(self, tenant: str) -> ManagedAgent:
        try:
            return self._supervisor.get(tenant)
        except NotFound as missing:
            raise InvalidParamsError(
                message=f"unknown tenant {tenant!r}: the tenant names an Ether agent; "
                f"{missing.message}"
            ) from None


_NO_PUSH = PushNotificationNotSupportedError(
    message="push notifications are not offered: stream (SendStreamingMessage, SubscribeToTask) "
    "or poll GetTask"
)


def _identity(context: ServerCallContext) -> Identity:
    identity = context.state.get(IDENTITY, LOCAL)
    assert isinstance(identity, Identity)
    return identity


def _action(agent: ManagedAgent, skill: str) -> ActionInfo | None:
    """The action a message for ``skill`` runs, when it can be told now (the dispatcher decides:
    an unknown skill is refused there, with the list of skills)."""
    if not skill:
        return agent.actions[0] if len(agent.actions) == 1 else None
    return next((a for a in agent.actions if a.name == skill), None)


def _position(token: str) -> int:
    try:
        return int(decode_page_token(token))
    except ValueError:
        raise InvalidParamsError(
            message="page_token was not issued by ListTasks: pass the next_page_token of the "
            "previous page"
        ) from None
