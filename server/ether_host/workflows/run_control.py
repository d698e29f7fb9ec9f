"""Controlling runs: cancelling a pending, running or interrupted run, resuming an interrupted
one; each under the service's lock, so no two of them (nor a prune) look at a run at once."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog

from ether_host.background import Abandoned, run_to_the_end
from ether_host.errors import FailedPrecondition
from ether_host.reasons import Reason
from ether_host.workflows import recovery
from ether_host.workflows.engine import CANCELLED
from ether_host.workflows.live_runs import (
    LiveRuns,
    check_request_id,
    host_stopping,
    public,
    required,
)
from ether_host.workflows.model import RunEvent, RunState, rfc3339

log = structlog.get_logger("ether.workflows")


class RunControl(LiveRuns):
    """CancelRun and ResumeRun."""

    async def cancel(
        self,
        run_id: str,
        reason: str,
        on_cancelled: Callable[[], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        """Cancel a pending, running or interrupted run. ``on_cancelled`` is awaited once this
        request turned a stored INTERRUPTED run CANCELLED (never for a live run, whose end is
        told as it comes, nor for one cancelled already), before the answer and before any
        other resume or cancel of a run is looked at: the servicer has the run's end delivered
        to its notify there; it was otherwise delivered only by the next host to start. The
        cancel goes on to its end, ``on_cancelled`` included, when its caller goes away
        (background.run_to_the_end says why a shield does not do)."""
        try:
            return await run_to_the_end(self._tg, self._cancel, run_id, reason, on_cancelled)
        except Abandoned:
            raise host_stopping(f"cancel run {run_id} again once it has restarted") from None

    async def _cancel(
        self, run_id: str, reason: str, on_cancelled: Callable[[], Awaitable[None]] | None
    ) -> dict[str, Any]:
        async with self._lock:
            live = self._live.get(required(run_id, "run_id"))
            if live is not None and live.record.state not in RunState.ENDED:
                live.stop(CANCELLED, "cancelled", reason or "cancelled with CancelRun")
                return live.record.api()
            body = live.record.stored() if live is not None else await self._stored(run_id)
            state = str(body["state"]).removeprefix("RUN_STATE_")
            if state == RunState.CANCELLED:
                return public(body)
            if state != RunState.INTERRUPTED:
                raise FailedPrecondition(
                    f"run {run_id} already ended {state}; only pending, running or "
                    "interrupted runs can be cancelled",
                    reason=Reason.RUN_ENDED,
                    metadata={"state": state},
                )
            now = time.time()
            error = {"code": "cancelled", "message": reason or "cancelled with CancelRun"}
            sequence = int(body.get("last_sequence") or 0) + 1
            body.update(
                state="RUN_STATE_CANCELLED",
                error=error,
                ended_at=rfc3339(now),
                last_sequence=str(sequence),
            )
            self.store.add_event(
                run_id,
                RunEvent(
                    sequence,
                    now,
                    "run_completed",
                    {
                        "state": "RUN_STATE_CANCELLED",
                        "error": error,
                        "usage": body.get("usage") or {},
                        "tasks": body.get("tasks") or {},
                    },
                ),
            )
            self.store.put_run(body)
            await self.store.flush()
            if on_cancelled is not None:
                await on_cancelled()
            return public(body)

    async def resume(
        self,
        run_id: str,
        include_non_idempotent: bool,
        request_id: str,
        on_resumed: Callable[[], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        """Continue an interrupted run. ``on_resumed`` is awaited once this request resumed it
        (never for a repeat of its request_id), before the answer and before any other resume
        or cancel of a run is looked at: the servicer has the run watched again there, and two
        repeats at once each had it watched, its end delivered twice."""
        if request_id:
            check_request_id(request_id)
        async with self._lock:
            live = self._live.get(required(run_id, "run_id"))
            if live is not None:
                if request_id and request_id in live.record.resume_requests:
                    return live.record.api()
                raise FailedPrecondition(
                    f"run {run_id} is {live.record.state}, not interrupted",
                    reason=Reason.RUN_NOT_INTERRUPTED,
                    metadata={"state": live.record.state},
                )
            body = await self._stored(run_id)
            if request_id and request_id in (body.get("resume_requests") or []):
                return public(body)
            state = str(body["state"]).removeprefix("RUN_STATE_")
            if state != RunState.INTERRUPTED:
                raise FailedPrecondition(
                    f"run {run_id} is {state}; only interrupted runs can be resumed",
                    reason=Reason.RUN_NOT_INTERRUPTED,
                    metadata={"state": state},
                )
            if self._stopping:
                raise host_stopping(f"resume run {run_id} once it has restarted")
            tasks = await anyio.to_thread.run_sync(self.store.tasks, run_id)
            execution = recovery.rebuild(
                body,
                tasks,
                include_non_idempotent,
                request_id,
                store=self.store,
                dispatcher=self.dispatcher,
                supervisor=self.supervisor,
            )
            self._start(execution)
            resumed = execution.record.api()
            await self.store.flush()  # the resume is on disk before the caller hears of it
            if on_resumed is not None:
                await on_resumed()
            log.info("run resumed", run_id=run_id, **execution.resumed or {})
            return resumed
