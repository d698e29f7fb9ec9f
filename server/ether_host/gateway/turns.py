"""Running a user turn: the pipeline's steps, then the reply, as events on the session.

Turns of one session run one at a time, in order, in the session's worker.
Each step is an ordinary task (TaskContext.session_id is the session, so the
agent may use ``ctx.*``). A step that fails is an ``error`` event and the
turn goes on; the turn always ends with ``turn_completed``. The gateway
agent is checked before the reply: an unhealthy one is replaced (failover),
and one that dies during the reply is replaced for the next turn.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, NamedTuple

import anyio
import structlog

from ether_host.agents import ERROR, Dispatcher, TaskEvent, TaskInput, TaskResult
from ether_host.errors import (
    DeadlineExceeded,
    EtherError,
    FailedPrecondition,
    NotFound,
    Unavailable,
)
from ether_host.gateway import events as ev
from ether_host.gateway.context import SET
from ether_host.gateway.events import error_data
from ether_host.gateway.notices import TURN
from ether_host.gateway.pipeline import REPLY_STEP, Step
from ether_host.gateway.session import Session, Turn
from ether_host.gateway.sessions import SessionStore
from ether_host.gateway.settings import GatewaySettings
from ether_host.telemetry import optional_span

log = structlog.get_logger("ether.gateway")

GATEWAY_ACTION = "respond"  # the gateway agent's action for the reply, when it has several
HOST_PARAMS = ("message", "turn", "steps", "session")
# How long a finished turn waits for its notice to be recorded (the notifier starts after the
# gateway; a host stopping may never start it): past it the notice is dropped, logged.
NOTICE_BUDGET = 30.0


class _TurnLimit(NamedTuple):
    """A turn's time: its deadline (``time.monotonic()``, as tasks' deadlines are) and the
    scope that ends the turn when it falls due."""

    deadline: float
    scope: anyio.CancelScope


class TurnRunner:
    """Runs the turns of sessions on the dispatcher."""

    def __init__(
        self, dispatcher: Dispatcher, store: SessionStore, settings: GatewaySettings
    ) -> None:
        self.dispatcher = dispatcher
        self.store = store
        self.settings = settings

    async def serve(self, session: Session) -> None:
        """The session's worker: take turns from its queue until it closes."""
        with anyio.CancelScope() as scope:
            session.worker = scope
            async with session.inbox:
                async for turn in session.inbox:
                    session.current_turn = turn.number
                    start = session.events.last_sequence
                    try:
                        await self.run(session, turn)
                    except Exception:  # one broken turn must not end the session
                        correlation_id = secrets.token_hex(6)
                        log.exception(
                            "turn crashed",
                            session=session.id,
                            turn=turn.number,
                            correlation_id=correlation_id,
                        )
                        session.emit(
                            ev.ERROR,
                            turn.number,
                            error_data(
                                "",
                                "internal",
                                f"internal error; the host log has it under {correlation_id}",
                            ),
                        )
                        session.completed = turn.number
                        session.emit(
                            ev.TURN_COMPLETED,
                            turn.number,
                            {"latency": time.monotonic() - turn.accepted_at, "steps_run": []},
                        )
                        await self._notice(session, turn, start, [])
                    finally:
                        session.current_turn = 0

    async def run(self, session: Session, turn: Turn) -> None:
        """Run a turn, inside its span when traced: a trace of its own (a session lives for
        hours), linked to the call that sent the message; its steps' tasks are its children."""
        attributes = {"ether.session_id": session.id, "ether.turn": turn.number}
        with optional_span(
            self.dispatcher.tracing, "ether.gateway.turn", attributes, links=turn.trace_links
        ):
            await self._run(session, turn)

    async def _run(self, session: Session, turn: Turn) -> None:
        start = session.events.last_sequence
        timeout = session.pipeline.turn_timeout or self.settings.turn_timeout
        deadline = time.monotonic() + timeout
        outputs: dict[str, Any] = {}
        steps_run: list[str] = []
        with anyio.move_on_after(timeout) as limit:
            turn_limit = _TurnLimit(deadline, limit)
            for group in session.pipeline.groups():
                scope = {
                    "context": session.context.snapshot(),
                    "turn": turn.number,
                    "message": {"text": turn.text, "data": turn.data},
                }
                chosen = [
                    s for s in group if s.trigger is None or s.trigger.holds(turn.number, scope)
                ]
                steps_run.extend(s.name for s in chosen)
                if len(chosen) == 1:
                    await self._step(session, turn, chosen[0], outputs, turn_limit)
                elif chosen:
                    async with anyio.create_task_group() as tg:
                        for step in chosen:
                            tg.start_soon(self._step, session, turn, step, outputs, turn_limit)
        if limit.cancel_called:
            session.emit(
                ev.ERROR,
                turn.number,
                error_data(
                    "", "timeout", f"the turn did not finish within its limit of {timeout:g}s"
                ),
            )
        session.completed = turn.number
        session.emit(
            ev.TURN_COMPLETED,
            turn.number,
            {"latency": time.monotonic() - turn.accepted_at, "steps_run": steps_run},
        )
        await self._notice(session, turn, start, steps_run)

    async def _notice(self, session: Session, turn: Turn, start: int, steps_run: list[str]) -> None:
        """Deliver the finished turn to the session's notify: its reply (the last whole one
        the gateway agent gave) and its errors, as the turn's events after ``start`` say.
        Shielded: a session closed right now still has its last turn delivered."""
        notices = self.store.notices
        if not session.notify or notices is None:
            return
        said = [e for _, e in session.events.since(start) if e.turn == turn.number]
        replies = [e.data for e in said if e.kind == ev.REPLY]
        whole = [r for r in replies if not r.get("partial")]
        output = {
            "turn": {
                "number": turn.number,
                "id": f"{session.id}.{turn.number}",
                "client_message_id": turn.client_message_id,
                "reply": (whole or replies or [None])[-1],
                "errors": [e.data for e in said if e.kind == ev.ERROR],
                "steps_run": steps_run,
            }
        }
        with anyio.move_on_after(NOTICE_BUDGET, shield=True) as waited:
            await notices.session_notice(session.notify, TURN, session.id, output)
        if waited.cancelled_caught:
            log.warning("turn notice dropped", session=session.id, turn=turn.number)

    async def _step(
        self,
        session: Session,
        turn: Turn,
        step: Step,
        outputs: dict[str, Any],
        turn_limit: _TurnLimit,
    ) -> None:
        """Run one step by the turn's deadline, or by its own timeout if sooner."""
        gateway_step = step.reply and not step.agent
        if gateway_step:
            await self.store.agents.refresh()  # in a cluster: other hosts' gateway agents too
        agent = (
            self.store.agents.serving_agent(session, turn.number) if gateway_step else step.agent
        )
        label = step.name
        if agent is None:
            session.emit(
                ev.ERROR,
                turn.number,
                error_data(
                    label,
                    "no_agent_available",
                    "no healthy gateway agent can serve this session right now; send the message again shortly",
                    retryable=True,
                ),
            )
            return
        action = step.action
        actions = self._actions_here(agent)
        elsewhere = self.store.agents.elsewhere
        if actions is None and elsewhere is not None:
            actions = await elsewhere.actions_of(agent)  # it runs on other hosts only
        if gateway_step and not action:
            action = self._gateway_action(actions or {})
        deadline = turn_limit.deadline
        if step.timeout is not None:
            deadline = min(deadline, time.monotonic() + step.timeout)
        task = TaskInput(
            agent=agent,
            action=action,
            params=self._params(actions or {}, action, step, turn, outputs, session),
            # Unguessable: a caller who knows the session's id could otherwise start a task
            # under the next turn's id first and make that turn fail DUPLICATE_TASK_ID.
            task_id=f"{session.id}.{turn.number}.{step.name}.{secrets.token_hex(4)}",
            session_id=session.id,
            deadline=deadline,
        )
        session.task_roots.add(task.task_id)
        started = time.monotonic()
        try:
            result = await self.dispatcher.execute(
                task, on_event=self._progress(session, turn, step, gateway_step)
            )
        except EtherError as error:
            latency = time.monotonic() - started
            session.emit(
                ev.STEP_COMPLETED,
                turn.number,
                _completed(step, agent, action, task.task_id, ERROR, latency),
            )
            if isinstance(error, DeadlineExceeded) and deadline >= turn_limit.deadline:
                # The turn's time ran out, not the step's: the task's deadline and the turn's
                # timer fall due together, and either may be seen first. Whichever it is, the
                # turn says so, once (an `error` with no step), as docs/gateway.md promises.
                turn_limit.scope.cancel()
                return
            session.emit(
                ev.ERROR,
                turn.number,
                error_data(
                    label, _code(error), error.message, retryable=isinstance(error, Unavailable)
                ),
            )
            if gateway_step and isinstance(error, Unavailable):
                self.store.agents.fail_over(session, turn.number, "agent_died", exclude={agent})
            return
        finally:
            session.task_roots.discard(task.task_id)
        latency = time.monotonic() - started
        session.emit(
            ev.STEP_COMPLETED,
            turn.number,
            _completed(step, agent, result.action, task.task_id, result.status, latency),
        )
        self._outcome(session, turn, step, result, outputs)

    def _outcome(
        self, session: Session, turn: Turn, step: Step, result: TaskResult, outputs: dict[str, Any]
    ) -> None:
        if result.status == ERROR:
            error = result.error
            session.emit(
                ev.ERROR,
                turn.number,
                error_data(
                    step.name,
                    error.code if error else "error",
                    error.message if error else "the step failed",
                    error.details if error else {},
                    error.retryable if error else False,
                ),
            )
            return
        outputs[step.name] = result.data
        if step.output_key:
            try:
                session.context.update(SET, {step.output_key: result.data}, f"agent:{result.agent}")
            except EtherError as error:
                session.emit(
                    ev.ERROR, turn.number, error_data(step.name, _code(error), error.message)
                )
        if step.reply:
            session.emit(ev.REPLY, turn.number, _reply(result))

    def _actions_here(self, agent_name: str) -> dict[str, dict[str, Any]] | None:
        """The actions of an agent this host runs, with their params schemas (None: not here)."""
        agent = self.store.supervisor.agents.get(agent_name)
        if agent is None:
            return None
        return {info.name: info.params_schema for info in agent.actions}

    @staticmethod
    def _gateway_action(actions: dict[str, dict[str, Any]]) -> str:
        return GATEWAY_ACTION if GATEWAY_ACTION in actions or len(actions) != 1 else ""

    def _params(
        self,
        actions: dict[str, dict[str, Any]],
        action: str,
        step: Step,
        turn: Turn,
        outputs: dict[str, Any],
        session: Session,
    ) -> dict[str, Any]:
        """The step's params plus the host's keys that the action's params schema accepts."""
        offered = {
            "message": {"text": turn.text, "data": turn.data},
            "turn": turn.number,
            "steps": dict(outputs),
            "session": {"id": session.id, "metadata": session.metadata},
        }
        schema = _schema(actions, action)
        params = dict(step.params)
        for key in HOST_PARAMS:
            if _accepts(schema, key):
                params[key] = offered[key]
        return params

    def _progress(self, session: Session, turn: Turn, step: Step, gateway_step: bool) -> Any:
        name = "" if gateway_step and step.name == REPLY_STEP else step.name

        def sink(event: TaskEvent) -> None:
            if event.kind != "progress":
                return
            payload = event.payload
            session.emit(
                ev.PROGRESS,
                turn.number,
                {
                    "step": name,
                    "progress": float(payload.get("progress") or 0),
                    "total": float(payload.get("total") or 0),
                    "message": str(payload.get("message") or ""),
                },
            )

        return sink


def _schema(actions: dict[str, dict[str, Any]], action: str) -> dict[str, Any]:
    if action in actions:
        return actions[action]
    if not action and len(actions) == 1:
        return next(iter(actions.values()))
    return {}


def _accepts(schema: dict[str, Any], key: str) -> bool:
    if not schema:
        return True
    if key in (schema.get("properties") or {}):
        return True
    return schema.get("additionalProperties", True) is not False


def _completed(
    step: Step, agent: str, action: str, task_id: str, status: str, latency: float
) -> dict[str, Any]:
    return {
        "step": step.name,
        "agent": agent,
        "action": action,
        "task_id": task_id,
        "status": status,
        "latency": latency,
    }


def _reply(result: TaskResult) -> dict[str, Any]:
    """A result as a reply: a string is the text; an object's "text" (or "reply") is, and it is the data."""
    data = result.data
    text = ""
    if isinstance(data, str):
        return {"agent": result.agent, "text": data, "data": None, "partial": False}
    if isinstance(data, dict):
        found = data.get("text", data.get("reply"))
        text = found if isinstance(found, str) else ""
    return {"agent": result.agent, "text": text, "data": data, "partial": False}


def _code(error: EtherError) -> str:
    if isinstance(error, Unavailable):
        return "agent_crashed"
    if isinstance(error, DeadlineExceeded):
        return "timeout"
    if isinstance(error, FailedPrecondition | NotFound):
        return "no_agent_available"
    return error.reason.lower()
