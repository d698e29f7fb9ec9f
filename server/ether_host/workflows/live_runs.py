"""What the parts of the workflow service share: the runs held live in memory (``RunExecution``)
and the store under them, starting a run and driving it to its end, and a run read by id, live
or stored."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import structlog

from ether_host import heap_trim
from ether_host.agents import Dispatcher
from ether_host.background import start_detached
from ether_host.errors import FieldViolation, InvalidArgument, NotFound, Unavailable
from ether_host.reasons import Reason
from ether_host.supervisor import Supervisor
from ether_host.workflows.engine import RunExecution
from ether_host.workflows.settings import parse_settings
from ether_host.workflows.store import RunStore

log = structlog.get_logger("ether.workflows")

# Runs of at least this many tasks trim the heap as they end (heap_trim.py). A 1,000-task map
# left ~6 MiB in glibc's free lists that a trim returned, a 10,000-task one ~11, a 100,000-task
# one ~18 (bench/map_scale.py's host, 2026-11-26); a run of fewer tasks leaves little, and
# trimming after each would lock glibc's arenas for a few ms each time for little.
TRIM_AFTER_TASKS = 1000
PRIVATE_KEYS = ("resume_requests", "next_task", "fanned", "seq", "depth")


def public(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in PRIVATE_KEYS}


def required(value: str, name: str) -> str:
    if not value:
        raise InvalidArgument(
            f"{name} is required",
            reason=Reason.MISSING_FIELD,
            violations=[FieldViolation(name, "required")],
        )
    return value


def check_request_id(request_id: str) -> None:
    if len(request_id) > 128 or not request_id.isprintable():
        raise InvalidArgument(
            "request_id must be at most 128 printable characters (such as a UUID)",
            reason=Reason.INVALID_REQUEST_ID,
            violations=[FieldViolation("request_id", "at most 128 printable characters")],
        )


def host_stopping(then: str) -> Unavailable:
    """The refusal of a change while the host stops: UNAVAILABLE, HOST_STOPPING, as every
    service answers it (a retry on the restarted host succeeds); ``then`` says what to do."""
    return Unavailable(
        f"the host is stopping; {then}", reason=Reason.HOST_STOPPING, retry_after=1.0
    )


class LiveRuns:
    """The state the service's parts share: the runs of one host, live and stored."""

    def __init__(
        self,
        state_dir: Path,
        supervisor: Supervisor,
        dispatcher: Dispatcher,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = RunStore(Path(state_dir) / "workflows" / "runs.sqlite3")
        self.supervisor = supervisor
        self.dispatcher = dispatcher
        self.settings = parse_settings(settings or {})
        self._live: dict[str, RunExecution] = {}
        self._requests: dict[str, str] = {}
        # The request ids of CreateRuns under way (checking their spec, committing their run): a
        # repeat arriving meanwhile waits for the first, then answers as a repeat does.
        self._creating: dict[str, anyio.Event] = {}
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self._stopping = False
        self._run_ended = anyio.Event()

    # -- live runs -------------------------------------------------------------------------

    def _start(self, execution: RunExecution) -> None:
        assert self._tg is not None, "workflow service is not running"
        execution.save_run()
        self._live[execution.record.id] = execution
        if self.dispatcher.tracing is not None:  # the CreateRun or ResumeRun span
            execution.trace_links = self.dispatcher.tracing.links_to_current()
        # Not in the context of the RPC that started the run: the run outlives it.
        start_detached(self._tg, self._drive, execution, name=f"run {execution.record.id}")

    async def _drive(self, execution: RunExecution) -> None:
        try:
            await execution.execute()
        finally:
            with anyio.CancelScope(shield=True):
                await self.store.flush()
            self._live.pop(execution.record.id, None)
            self._run_ended.set()
        run_id, tasks = execution.record.id, execution.record.counts.total
        del execution  # the run's records go with this last reference
        if tasks >= TRIM_AFTER_TASKS:
            await self._trim_heap(run_id, tasks)

    @staticmethod
    async def _trim_heap(run_id: str, tasks: int) -> None:
        """Hand what glibc's allocator kept of a large run back to the OS (heap_trim.py), in a
        worker thread: 1-9 ms here after a 100,000-task run, too long for the event loop."""
        began = time.perf_counter()
        released = await anyio.to_thread.run_sync(heap_trim.trim)
        if released is not None:
            log.info(
                "heap trimmed after a large run",
                run_id=run_id,
                tasks=tasks,
                released_bytes=released,
                took_ms=round((time.perf_counter() - began) * 1000, 2),
            )

    # -- a run by id -----------------------------------------------------------------------

    async def _stored(self, run_id: str) -> dict[str, Any]:
        body = await anyio.to_thread.run_sync(self.store.get_run, required(run_id, "run_id"))
        if body is None:
            raise NotFound(
                f"no run {run_id!r}; ListRuns shows the runs of this host (ended runs are "
                "deleted past the host's [workflows] keep_runs and keep_days)",
                reason=Reason.RUN_NOT_FOUND,
                resource=("run", run_id),
            )
        return body

    async def get(self, run_id: str) -> dict[str, Any]:
        live = self._live.get(run_id)
        if live is not None:
            return live.record.api()
        return public(await self._stored(run_id))
