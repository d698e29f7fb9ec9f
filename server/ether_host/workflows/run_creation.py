"""Creating runs: the spec checked (in a worker thread, with the agents of the cluster), a
repeated request_id answered with the run the first request created, and the run started,
committed and watched in a task that goes on to its end when its caller goes away."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog

from ether_host.background import Abandoned, run_to_the_end
from ether_host.errors import (
    FieldViolation,
    InvalidArgument,
    QuotaViolation,
    ResourceExhausted,
)
from ether_host.reasons import Reason
from ether_host.workflows.engine import RunExecution
from ether_host.workflows.live_runs import LiveRuns, check_request_id, host_stopping
from ether_host.workflows.model import RunRecord, StageRecord
from ether_host.workflows.source import Source, load_text
from ether_host.workflows.spec import WorkflowSpec, parse_spec

log = structlog.get_logger("ether.workflows")


class RunCreation(LiveRuns):
    """CreateRun: a spec checked and started as a run."""

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
            check_request_id(request_id)
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
            raise host_stopping("create the run again once it has restarted") from None

    async def _start_and_watch(
        self,
        record: RunRecord,
        on_created: Callable[[str], Awaitable[None]] | None,
        underway: bool,
    ) -> dict[str, Any]:
        """The run as it was created, once it started, was committed and ``on_created`` ended."""
        try:
            if self._stopping:
                raise host_stopping("create the run again once it has restarted")
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
