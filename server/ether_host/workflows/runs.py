"""WorkflowService's use cases: create, read, list, cancel, wait, watch, resume, report.

Live runs are held in memory (``RunExecution``); every change goes to the
store as it happens, and a finished run is read back from the store once
its last writes are committed. At start, runs a crashed host left running
are marked INTERRUPTED; at stop, running runs are interrupted the same way.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from ether_host import heap_trim
from ether_host.agents import Dispatcher
from ether_host.background import Abandoned, run_to_the_end, start_detached
from ether_host.errors import (
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NotFound,
    OutOfRange,
    QuotaViolation,
    ResourceExhausted,
)
from ether_host.paging import Page, paginate
from ether_host.reasons import Reason
from ether_host.supervisor import Supervisor
from ether_host.workflows import recovery, report
from ether_host.workflows.engine import CANCELLED, INTERRUPTED, RunExecution
from ether_host.workflows.model import (
    DETAIL_KINDS,
    RunEvent,
    RunRecord,
    RunState,
    StageRecord,
    rfc3339,
)
from ether_host.workflows.settings import parse_settings
from ether_host.workflows.source import Source, load_text
from ether_host.workflows.spec import WorkflowSpec, parse_spec
from ether_host.workflows.store import RunStore

log = structlog.get_logger("ether.workflows")

PRUNE_EVERY = 600.0  # seconds between looks for ended runs past keep_days, besides run ends
SHUTDOWN_GRACE = 10.0
MAX_REPORT_BYTES = 60 * 1024 * 1024
REPORT_PAGE = 1000  # tasks read from the store at a time for a report
# Runs of at least this many tasks trim the heap as they end (heap_trim.py). A 1,000-task map
# left ~6 MiB in glibc's free lists that a trim returned, a 10,000-task one ~11, a 100,000-task
# one ~18 (bench/map_scale.py's host, 2026-11-26); a run of fewer tasks leaves little, and
# trimming after each would lock glibc's arenas for a few ms each time for little.
TRIM_AFTER_TASKS = 1000
PRIVATE_KEYS = ("resume_requests", "next_task", "fanned", "seq", "depth")


def _public(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in PRIVATE_KEYS}


def _beyond_the_end(run_id: str, after: int, last: int) -> OutOfRange:
    return OutOfRange(
        f"after_sequence {after} is beyond the last event ({last}) of run {run_id}, "
        "which has ended",
        reason=Reason.SEQUENCE_OUT_OF_RANGE,
        metadata={"last_sequence": str(last)},
    )


def _required(value: str, name: str) -> str:
    if not value:
        raise InvalidArgument(
            f"{name} is required",
            reason=Reason.MISSING_FIELD,
            violations=[FieldViolation(name, "required")],
        )
    return value


def _check_request_id(request_id: str) -> None:
    if len(request_id) > 128 or not request_id.isprintable():
        raise InvalidArgument(
            "request_id must be at most 128 printable characters (such as a UUID)",
            reason=Reason.INVALID_REQUEST_ID,
            violations=[FieldViolation("request_id", "at most 128 printable characters")],
        )


class Workflows:
    """The workflow runs of one host."""

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

    # -- lifecycle ------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Open the store, recover from a crash, then own the live runs until cancelled."""
        await anyio.to_thread.run_sync(self.store.open)
        try:
            await self._recover()
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._keep_ended_runs_pruned, name="ended runs pruner")
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.store.close)

    async def _recover(self) -> None:
        """Mark the runs a stopped host left pending or running as INTERRUPTED."""
        await recovery.interrupt_stale(self.store)
        self._requests = await anyio.to_thread.run_sync(self.store.request_ids)

    async def _keep_ended_runs_pruned(self) -> None:
        """Delete ended runs past keep_runs and keep_days: at start, after runs end, and every
        PRUNE_EVERY seconds (for runs that only aged past keep_days)."""
        if not (self.settings.keep_runs or self.settings.keep_days):
            return
        while True:
            try:
                await self.prune_ended_runs()
            except Exception:  # a store error must not take the host down: try again later
                log.exception("deleting ended runs failed", path=str(self.store.path))
            with anyio.move_on_after(PRUNE_EVERY):
                await self._run_ended.wait()
            self._run_ended = anyio.Event()

    async def prune_ended_runs(self) -> int:
        """Delete the ended runs the settings no longer keep, with their tasks and events; the
        number deleted. Their request ids are forgotten: a CreateRun repeating one makes a new run."""
        keep, created_before = self.settings.keep_runs, self.settings.created_before(time.time())
        async with self._lock:  # no resume or cancel of a run while it is being deleted
            found = await anyio.to_thread.run_sync(
                self.store.ended_runs_to_delete, keep, created_before
            )
            doomed = [run_id for run_id in found if run_id not in self._live]
            if not doomed:
                return 0
            self.store.delete_runs(doomed)
            await self.store.flush()
            gone = set(doomed)
            self._requests = {r: run for r, run in self._requests.items() if run not in gone}
        log.info(
            "ended runs deleted",
            count=len(doomed),
            keep_runs=keep,
            keep_days=self.settings.keep_days,
        )
        return len(doomed)

    async def shutdown(self) -> None:
        """Interrupt every live run (cancel frames to their tasks), then commit the store."""
        self._stopping = True
        live = list(self._live.values())
        for execution in live:
            execution.stop(
                INTERRUPTED,
                "interrupted",
                "the host is shutting down; ResumeRun continues the run after a restart",
            )
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(SHUTDOWN_GRACE):
                for execution in live:
                    await execution.done.wait()
            await self.store.flush()

    # -- create ----------------------------------------------------------------------------

    def _catalog(self, name: str) -> list[str] | None:
        agent = self.supervisor.agents.get(name)
        return None if agent is None else [a.name for a in agent.actions]

    async def create(
        self,
        spec: dict[str, Any] | None,
        spec_text: str | None,
        *,
        request_id: str = "",
        validate_only: bool = False,
        creator: str = "",
        on_created: Callable[[str], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        """Validate a spec and start a run of it; the run is returned at once, PENDING.

        A repeated ``request_id`` answers with the run the first request created, whatever the
        spec says, and once that run is committed; ``on_created`` is awaited with the id of a
        run this request created (never for a repeat), before the answer and before a repeat
        that came meanwhile answers: the servicer has the run watched with its notify there, so
        the first request's notify holds. Once the spec is checked, the run's start, commit and
        ``on_created`` go on to their end when the caller goes away (``_start_checked``)."""
        if request_id:
            _check_request_id(request_id)
        if not request_id or validate_only:
            record = await self._checked(spec, spec_text, request_id, creator)
            return record.api() if validate_only else await self._start_checked(record, on_created)
        # A repeat waits for a CreateRun of its request_id still under way (checking the spec,
        # committing the run), then answers as a repeat. Checked as a new run instead, it was
        # refused RESOURCE_EXHAUSTED at max_active_runs (the first's run counting) or
        # INVALID_ARGUMENT for a spec of its own, or told of the run before it was committed.
        while (underway := self._creating.get(request_id)) is not None:
            await underway.wait()
        if request_id in self._requests:
            return await self.get(self._requests[request_id])
        self._creating[request_id] = anyio.Event()
        try:
            record = await self._checked(spec, spec_text, request_id, creator)
        except BaseException:
            self._created(request_id)
            raise
        # Let go by the run's start once that ended, not here: it goes on when the caller goes
        # away, and a repeat let by meanwhile was answered before the run was watched.
        return await self._start_checked(record, on_created, underway=True)

    def _created(self, request_id: str) -> None:
        """The CreateRun of ``request_id`` is no longer under way: its repeats go on."""
        self._creating.pop(request_id).set()

    async def _checked(
        self, spec: dict[str, Any] | None, spec_text: str | None, request_id: str, creator: str
    ) -> RunRecord:
        """The run of a spec, checked, not started (no id yet)."""
        if spec_text is None and spec is None:
            raise InvalidArgument(
                "give the workflow as spec or spec_text",
                reason=Reason.MISSING_SPEC,
                violations=[FieldViolation("spec", "required (or spec_text)")],
            )

        # Stages may name agents only other hosts of the cluster run (docs/cluster.md).
        other_hosts = self.dispatcher.other_hosts
        elsewhere = {} if other_hosts is None else await other_hosts.actions_elsewhere()

        def catalog(name: str) -> list[str] | None:
            here = self._catalog(name)
            return here if here is not None else elsewhere.get(name)

        def parse() -> WorkflowSpec:
            source = load_text(spec_text) if spec_text is not None else Source(spec or {})
            return parse_spec(source, catalog)

        # A spec at the size bound (workflows/limits.py) takes 0.2-0.4 s to load and check; in a
        # worker thread that time no longer stalls every other RPC on the event loop.
        parsed = await anyio.to_thread.run_sync(parse)
        return RunRecord(
            "",
            parsed,
            spec_text or "",
            creator=creator,
            request_id=request_id,
            stages=[StageRecord(s.name) for s in parsed.stages],
        )

    async def _start_checked(
        self,
        record: RunRecord,
        on_created: Callable[[str], Awaitable[None]] | None,
        underway: bool = False,
    ) -> dict[str, Any]:
        """Start the checked run, commit it and await ``on_created``, as a task of the service's
        group that the caller only waits for (background.run_to_the_end): grpc.aio cancels the
        handler of a caller that went away between the run's start and ``on_created``'s end,
        and the run went on unwatched, its notify never delivered. ``underway``: the request's
        id is in ``_creating``, to be let go once this ends."""
        try:
            return await run_to_the_end(
                self._tg, self._start_and_watch, record, on_created, underway
            )
        except Abandoned:
            raise FailedPrecondition(
                "the host is shutting down; create the run after it restarts",
                reason=Reason.HOST_STOPPING,
            ) from None

    async def _start_and_watch(
        self,
        record: RunRecord,
        on_created: Callable[[str], Awaitable[None]] | None,
        underway: bool,
    ) -> dict[str, Any]:
        """The run as it was created, once it started, was committed and ``on_created`` ended."""
        try:
            if self._stopping:
                raise FailedPrecondition(
                    "the host is shutting down; create the run after it restarts",
                    reason=Reason.HOST_STOPPING,
                )
            active = sum(1 for execution in self._live.values() if not execution.done.is_set())
            limit = self.settings.max_active_runs
            if active >= limit:
                raise ResourceExhausted(
                    f"{active} runs are active (limit {limit}, workflows.max_active_runs); wait for one to end",
                    reason=Reason.TOO_MANY_RUNS,
                    retry_after=5.0,
                    metadata={"limit": str(limit), "setting": "max_active_runs"},
                    quota_violations=[QuotaViolation("host", f"at most {limit} active runs")],
                )
            record.id = f"run-{secrets.token_hex(8)}"
            if record.request_id:
                self._requests[record.request_id] = record.id
            self._start(RunExecution(record, self.store, self.dispatcher, self.supervisor, {}))
            created = record.api()  # as it was created (PENDING), not as it runs after the flush
            # Committed before the answer (docs/restarts.md): a run a client was told of survives
            # a kill -9 of the host an instant later. A fresh clone saw one lost: the writer
            # thread had not committed it yet when the host was killed with the run's tasks held.
            await self.store.flush()
            if on_created is not None:
                await on_created(record.id)
        finally:
            if underway:
                self._created(record.request_id)
        log.info(
            "run created",
            run_id=record.id,
            name=record.name,
            stages=len(record.stages),
            creator=record.creator,
        )
        return created

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

    # -- read ------------------------------------------------------------------------------

    async def _stored(self, run_id: str) -> dict[str, Any]:
        body = await anyio.to_thread.run_sync(self.store.get_run, _required(run_id, "run_id"))
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
        return _public(await self._stored(run_id))

    async def list_runs(
        self, page_size: int, page_token: str, states: list[str], name: str
    ) -> Page[dict[str, Any]]:
        await self.store.flush()
        wanted = [f"RUN_STATE_{s}" for s in states]
        keys = await anyio.to_thread.run_sync(self.store.run_keys, wanted, name)
        page, token = paginate(
            keys,
            page_size,
            page_token,
            f"runs/{','.join(sorted(states))}/{name}",
            key=lambda k: (k[0], k[1]),
            newest_first=True,
        )
        bodies = await anyio.to_thread.run_sync(self.store.runs, [k[2] for k in page])
        runs = []
        for body in bodies:
            live = self._live.get(body["id"])
            runs.append(live.record.api() if live is not None else _public(body))
        return Page(runs, token)

    async def runs_by_state(self) -> dict[str, int]:
        """How many runs the store holds in each state (every state named, 0 included), once
        the writes queued so far are committed: what the metrics scrape shows."""
        await self.store.flush()
        found = await anyio.to_thread.run_sync(self.store.count_by_state)
        return {state: found.get(f"RUN_STATE_{state}", 0) for state in RunState.ALL}

    async def list_tasks(
        self, run_id: str, page_size: int, page_token: str, stage: str, state: str
    ) -> Page[dict[str, Any]]:
        live = self._live.get(_required(run_id, "run_id"))
        scope = f"tasks/{run_id}/{stage}/{state}"
        if live is not None:
            if stage and live.record.spec.stage(stage) is None:
                raise self._no_stage(run_id, stage, [s.name for s in live.record.spec.stages])
            tasks = [
                t
                for t in live.record.tasks()
                if (not stage or t.stage == stage) and (not state or t.state == state)
            ]
            page, token = paginate(tasks, page_size, page_token, scope, key=lambda t: (t.seq,))
            return Page([t.api() for t in page], token)
        body = await self._stored(run_id)
        names = [s["name"] for s in body["spec"]["stages"]]
        if stage and stage not in names:
            raise self._no_stage(run_id, stage, names)
        seqs = await anyio.to_thread.run_sync(
            self.store.task_seqs, run_id, stage, f"RUN_TASK_STATE_{state}" if state else ""
        )
        page_seqs, token = paginate(seqs, page_size, page_token, scope, key=lambda s: (s,))
        bodies = await anyio.to_thread.run_sync(self.store.tasks, run_id, page_seqs)
        return Page([_public(b) for b in bodies], token)

    @staticmethod
    def _no_stage(run_id: str, stage: str, names: list[str]) -> NotFound:
        return NotFound(
            f"run {run_id} has no stage {stage!r}; its stages: {', '.join(names)}",
            reason=Reason.STAGE_NOT_FOUND,
            resource=("stage", stage),
        )

    # -- control ---------------------------------------------------------------------------

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
            raise FailedPrecondition(
                "the host is shutting down", reason=Reason.HOST_STOPPING
            ) from None

    async def _cancel(
        self, run_id: str, reason: str, on_cancelled: Callable[[], Awaitable[None]] | None
    ) -> dict[str, Any]:
        async with self._lock:
            live = self._live.get(_required(run_id, "run_id"))
            if live is not None and live.record.state not in RunState.ENDED:
                live.stop(CANCELLED, "cancelled", reason or "cancelled with CancelRun")
                return live.record.api()
            body = live.record.stored() if live is not None else await self._stored(run_id)
            state = str(body["state"]).removeprefix("RUN_STATE_")
            if state == RunState.CANCELLED:
                return _public(body)
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
            return _public(body)

    async def wait(self, run_id: str, limit: float | None) -> dict[str, Any]:
        """The run once it ended, or as it is after ``limit`` seconds."""
        live = self._live.get(_required(run_id, "run_id"))
        if live is not None:
            with anyio.move_on_after(limit if limit is not None else float("inf")):
                await live.done.wait()
            return live.record.api()
        return await self.get(run_id)

    async def events(
        self, run_id: str, after: int, exclude_details: bool, stop: Callable[[], bool]
    ) -> AsyncIterator[dict[str, Any]]:
        """The run's events after ``after``, as API JSON; follows a live run to its end."""
        if after < 0:
            raise InvalidArgument(
                "after_sequence must not be negative",
                reason=Reason.INVALID_SEQUENCE,
                violations=[FieldViolation("after_sequence", "0 or more")],
            )
        live = self._live.get(_required(run_id, "run_id"))
        if live is not None:
            log = live.events
            async for event in log.follow(after, stop):
                if not (exclude_details and event.kind in DETAIL_KINDS):
                    yield event.api(run_id)
            # A run that has just ended stays live until its store write is done: a sequence
            # beyond its end is out of range now too, as it is once the run is read from the
            # store (and for a caller that asked for one before the run ended).
            if log.closed and after > log.last:
                raise _beyond_the_end(run_id, after, log.last)
            return
        body = await self._stored(run_id)
        last = int(body.get("last_sequence") or 0)
        if after > last:
            raise _beyond_the_end(run_id, after, last)
        await self.store.flush()
        cursor = after
        while cursor < last and not stop():
            page = await anyio.to_thread.run_sync(self.store.events, run_id, cursor, last)
            if not page:
                return
            for event in page:
                cursor = event.sequence
                if not (exclude_details and event.kind in DETAIL_KINDS):
                    yield event.api(run_id)

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
            _check_request_id(request_id)
        async with self._lock:
            live = self._live.get(_required(run_id, "run_id"))
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
                return _public(body)
            state = str(body["state"]).removeprefix("RUN_STATE_")
            if state != RunState.INTERRUPTED:
                raise FailedPrecondition(
                    f"run {run_id} is {state}; only interrupted runs can be resumed",
                    reason=Reason.RUN_NOT_INTERRUPTED,
                    metadata={"state": state},
                )
            if self._stopping:
                raise FailedPrecondition("the host is shutting down", reason=Reason.HOST_STOPPING)
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

    # -- report ----------------------------------------------------------------------------

    def _stored_tasks(self, run_id: str) -> Iterator[dict[str, Any]]:
        """The run's tasks as the store holds them, in creation order, a page at a time
        (blocking: from a worker thread)."""
        seqs = self.store.task_seqs(run_id, "", "")
        for start in range(0, len(seqs), REPORT_PAGE):
            yield from (
                _public(t) for t in self.store.tasks(run_id, seqs[start : start + REPORT_PAGE])
            )

    async def report(self, run_id: str, fmt: str) -> tuple[str, str, str]:
        """(content, content type, run state) of the run's report in ``fmt`` ('json' or 'markdown').

        Tasks are read from the store a page at a time (a live run's pending writes handed over
        first) and rendered in a worker thread, which stops once the report passes its bound:
        a run of 100,000 tasks is never all in memory at once for it."""
        live = self._live.get(_required(run_id, "run_id"))
        if live is not None:
            run = live.record.api()
            live.writes.flush()
        else:
            run = _public(await self._stored(run_id))
        await self.store.flush()
        render = report.render_json if fmt == "json" else report.render_markdown

        def made() -> tuple[str, str]:
            try:
                return render(run, self._stored_tasks(run_id), MAX_REPORT_BYTES)
            except report.TooLarge:
                return "", ""  # no content type: too large

        content, content_type = await anyio.to_thread.run_sync(made)
        if not content_type or len(content.encode()) > MAX_REPORT_BYTES:
            raise ResourceExhausted(
                f"the report of run {run_id} is larger than {MAX_REPORT_BYTES} bytes; page "
                "through ListRunTasks instead",
                reason=Reason.REPORT_TOO_LARGE,
            )
        return content, content_type, str(run["state"]).removeprefix("RUN_STATE_")
