"""The notifier: runs a task that names a Notify to its end whoever waits for it, watches a run
that names one until it ends, and delivers the final output: a webhook POST (signed, retried
with backoff, through the gateway's egress policy and audit) and a topic message.

Everything it delivers is in its own task group, started detached (background.py), so a caller
that goes away cancels neither the task nor the delivery; a delivery is recorded before its
first attempt and after each one (store.py), and the next host goes on with what is pending.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import structlog
from anyio.abc import TaskGroup, TaskStatus

from ether_host.agents import Dispatcher, TaskEvent, TaskInput, TaskResult, new_task_id
from ether_host.background import start_detached
from ether_host.errors import EtherError
from ether_host.gateway import SESSION_CLOSED, FetchRefused, FetchRequest, Gateway, SessionNotify
from ether_host.notifications.model import (
    DELIVERED,
    DENIED,
    FAILED,
    NOTIFY_IDENTITY,
    PENDING,
    SIGNATURE_HEADER,
    Delivery,
    Notify,
    NotifySettings,
)
from ether_host.notifications.store import DeliveryStore
from ether_host.workflows import Workflows

log = structlog.get_logger("ether.notifications")

# Egress refusals that may pass on another try: the rest are the policy's, which a retry
# cannot change.
_TRANSIENT = {"fetch_failed", "timeout", "rate_limited", "audit_unavailable"}
RETRY, DONE = "retry", "done"
# The type of the topic message of a delivery: "<kind>_completed" unless named here.
_TOPIC_TYPES = {SESSION_CLOSED: SESSION_CLOSED}


class Notifier:
    """Completion notifications of tasks, workflow runs and sessions (docs/notifications.md);
    the gateway's SessionNotices."""

    def __init__(
        self,
        settings: NotifySettings,
        dispatcher: Dispatcher,
        gateway: Gateway,
        workflows: Workflows,
        state_dir: Path,
    ) -> None:
        self.settings = settings
        self._dispatcher = dispatcher
        self._gateway = gateway
        self._workflows = workflows
        self._store = DeliveryStore(state_dir.absolute() / "notifications.sqlite3")
        self._tg: TaskGroup | None = None
        self._running = anyio.Event()  # set once the notifier owns its group
        self._watched: set[str] = set()  # the runs an _after_run waits for now: one each
        # Watched runs that ResumeRun or CancelRun changed meanwhile (run_resumed): their
        # _after_run may have read them INTERRUPTED before, and looks at them again.
        self._look_again: set[str] = set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Go on with what the last host left pending, then own every delivery until cancelled
        (a delivery cut short stays pending for the next host)."""
        await anyio.to_thread.run_sync(self._store.open)
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for delivery in await self._store.pending():
                    log.info("notification resumed", delivery=delivery.id, subject=delivery.subject)
                    start_detached(tg, self._deliver, delivery)
                for run_id, webhook_url, reply_topic, told in await self._store.awaited_runs():
                    self._watch(tg, run_id, Notify(webhook_url, reply_topic), told)
                task_status.started()
                self._running.set()
                await anyio.sleep_forever()
        finally:
            self._tg = None
            self._store.close()

    def check(self, notify: Notify) -> None:
        """InvalidArgument when ``notify`` cannot be delivered from this host."""
        self.settings.check(notify)

    async def execute(
        self,
        task: TaskInput,
        notify: Notify,
        on_event: Callable[[TaskEvent], None] | None = None,
    ) -> TaskResult:
        """Run ``task`` as Dispatcher.execute does, then deliver its output to ``notify``. The
        task runs in the notifier's group: a caller that goes away stops waiting for it, not
        the task, and its output is delivered all the same."""
        self.check(notify)
        if not task.task_id:  # its id now, not at its admission: a task refused before it (an
            task.task_id = new_task_id()  # agent not found) is delivered under its id too
        tg = self._group()
        ended = anyio.Event()
        outcome: list[TaskResult | EtherError] = []
        caller_waits = True

        def forward(event: TaskEvent) -> None:
            if caller_waits and on_event is not None:
                on_event(event)

        async def run_and_deliver() -> None:
            try:
                try:
                    outcome.append(await self._dispatcher.execute(task, forward))
                except EtherError as error:
                    outcome.append(error)
                finally:
                    ended.set()
                await self._notify("task", task.task_id, notify, _task_output(task, outcome[0]))
            except Exception:  # a failure here would end the notifier's group
                log.exception("notification of a task failed", task_id=task.task_id)
                ended.set()

        start_detached(tg, run_and_deliver)
        try:
            await ended.wait()
        finally:
            caller_waits = False
        if not outcome:
            raise RuntimeError(f"task {task.task_id} ended without an outcome")
        if isinstance(outcome[0], EtherError):
            raise outcome[0]
        return outcome[0]

    def check_session_notify(self, notify: SessionNotify) -> None:
        """InvalidArgument when a session's ``notify`` cannot be delivered from this host."""
        self.check(Notify(notify.webhook_url, notify.reply_topic))

    async def session_notice(
        self, notify: SessionNotify, kind: str, session_id: str, output: dict[str, Any]
    ) -> None:
        """Record a session's turn or closing and start delivering it; the gateway calls it
        as soon as it may run, before this notifier has started (it waits for that)."""
        await self._running.wait()
        try:
            await self._notify(
                kind, session_id, Notify(notify.webhook_url, notify.reply_topic), output
            )
        except Exception:  # a failure here must not end the session's worker
            log.exception("notification of a session failed", session=session_id, kind=kind)

    async def watch_run(self, run_id: str, notify: Notify) -> None:
        """Deliver ``run_id`` as GetRun shows it once it ends (kept across a host restart)."""
        if await self._store.await_run(run_id, notify.webhook_url, notify.reply_topic):
            self._watch(self._group(), run_id, notify, False)

    async def run_resumed(self, run_id: str) -> None:
        """ResumeRun continued ``run_id``, or CancelRun ended it from INTERRUPTED: when it is
        awaited, deliver it again once it ends. When its watch is still at it (a host just
        started, telling it INTERRUPTED or finding it told), that watch looks at it again
        instead: one watch a run, so its end is delivered once."""
        awaited = await self._store.awaited_run(run_id)
        if awaited is None:
            return
        if run_id in self._watched:
            self._look_again.add(run_id)
            return
        await self._store.run_interrupted(run_id, False)
        self._watch(self._group(), run_id, Notify(*awaited), False)

    def _watch(self, tg: TaskGroup, run_id: str, notify: Notify, told_interrupted: bool) -> None:
        self._watched.add(run_id)
        start_detached(tg, self._after_run, run_id, notify, told_interrupted)

    async def _after_run(self, run_id: str, notify: Notify, told_interrupted: bool = False) -> None:
        """Deliver the run once it ends. INTERRUPTED is told once (someone must resume or
        cancel it) and the run stays awaited: ResumeRun and CancelRun watch it again
        (run_resumed), or have this watch look at it again when they came while it was at it."""
        try:
            while True:
                run = await self._workflows.wait(run_id, None)
                if run.get("state") != "RUN_STATE_INTERRUPTED":
                    break
                if not told_interrupted:
                    await self._notify("run", run_id, notify, {"run": run})
                    await self._store.run_interrupted(run_id, True)
                # Checked with no await before the return: a run_resumed after this check
                # finds the run no longer watched, and watches it itself.
                if run_id not in self._look_again:
                    return
                self._look_again.discard(run_id)
                # As run_resumed does: INTERRUPTED again later (a host stop) is told again.
                await self._store.run_interrupted(run_id, False)
                told_interrupted = False
            await self._notify("run", run_id, notify, {"run": run})
            await self._store.run_ended(run_id)
        except EtherError as error:  # the run is gone (pruned while the host was down)
            log.warning("notification of a run dropped", run_id=run_id, error=error.message)
            await self._store.run_ended(run_id)
        finally:
            self._watched.discard(run_id)
            self._look_again.discard(run_id)

    async def _notify(self, kind: str, subject: str, notify: Notify, output: Any) -> None:
        targets = [("webhook", notify.webhook_url), ("topic", notify.reply_topic)]
        for target, address in targets:
            if not address:
                continue
            delivery_id = "n-" + secrets.token_hex(8)
            body = orjson.dumps({"delivery_id": delivery_id, "kind": kind, "id": subject, **output})
            delivery = Delivery(delivery_id, kind, subject, target, address, body)
            await self._store.add(delivery)
            log.info(
                "notification recorded",
                delivery=delivery_id,
                kind=kind,
                subject=subject,
                target=target,
                address=address,
            )
            start_detached(self._group(), self._deliver, delivery)

    async def _deliver(self, delivery: Delivery) -> None:
        """Attempt ``delivery`` until it is delivered, refused for good, or out of attempts."""
        while delivery.state == PENDING:
            if delivery.attempts:
                pause = self.settings.pause(delivery.attempts + 1)
                await anyio.sleep(pause * random.uniform(0.5, 1.0))
            delivery.attempts += 1
            if delivery.target == "webhook":
                step, outcome, status, error = await self._post(delivery)
            else:
                step, outcome, status, error = await self._publish(delivery)
            delivery.last_status, delivery.last_error = status, error
            if step == DONE:
                delivery.state = outcome
            elif delivery.attempts >= self.settings.max_attempts:
                delivery.state = FAILED
            await self._store.attempted(delivery, outcome, status, error)
            log.info(
                "notification attempt",
                delivery=delivery.id,
                subject=delivery.subject,
                target=delivery.target,
                attempt=delivery.attempts,
                outcome=outcome,
                status=status,
                error=error,
                state=delivery.state,
            )

    async def _post(self, delivery: Delivery) -> tuple[str, str, int, str]:
        """One webhook attempt: (retry or done, the attempt's outcome, HTTP status, error)."""
        request = FetchRequest(
            agent=NOTIFY_IDENTITY,
            url=delivery.address,
            method="POST",
            headers={
                "Content-Type": "application/json",
                SIGNATURE_HEADER: self.settings.signature(delivery.body),
                "X-Ether-Delivery": delivery.id,
                "X-Ether-Attempt": str(delivery.attempts),
            },
            body=delivery.body,
            task_id=delivery.subject if delivery.kind == "task" else "",
        )
        try:
            response = await self._gateway.egress.fetch(request)
        except FetchRefused as refused:
            if refused.code in _TRANSIENT:
                return RETRY, refused.code, 0, refused.message
            return DONE, DENIED, 0, refused.message
        status = response.status
        if 200 <= status < 300:
            return DONE, DELIVERED, status, ""
        said = response.body[:200].decode("utf-8", "replace")
        if status >= 500 or status in (408, 425, 429):
            return RETRY, "http_error", status, f"answered {status}: {said}"
        # The receiver refused this body: sending it again gets the same answer.
        return DONE, FAILED, status, f"answered {status}: {said}"

    async def _publish(self, delivery: Delivery) -> tuple[str, str, int, str]:
        kind = _TOPIC_TYPES.get(delivery.kind, f"{delivery.kind}_completed")
        try:
            await self._gateway.publish_from(
                NOTIFY_IDENTITY, delivery.address, kind, orjson.loads(delivery.body)
            )
        except EtherError as error:
            if error.code.value == "UNAVAILABLE":  # the cluster's Redis, out of reach
                return RETRY, "unavailable", 0, error.message
            return DONE, FAILED, 0, error.message
        return DONE, DELIVERED, 0, ""

    def _group(self) -> TaskGroup:
        if self._tg is None:
            raise RuntimeError("the notifier is not running")
        return self._tg


def _task_output(task: TaskInput, outcome: TaskResult | EtherError) -> dict[str, Any]:
    """The task's final output as the webhook and topic carry it: the AgentOutput as JSON, or
    the error that ended the task without one (its gRPC code, reason and message)."""
    if isinstance(outcome, TaskResult):
        return {"output": outcome.as_json()}
    return {
        "output": {
            "task_id": task.task_id,
            "status": "ERROR",
            "agent": task.agent,
            "action": task.action,
            "error": {
                "code": outcome.code.value,
                "reason": outcome.reason.value,
                "message": outcome.message,
            },
        }
    }
