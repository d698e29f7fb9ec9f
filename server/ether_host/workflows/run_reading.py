"""Reading runs: listing them and their tasks, waiting for one to end, following its events and
rendering its report; a live run is read from memory, an ended one from the store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio

from ether_host.errors import (
    FieldViolation,
    InvalidArgument,
    NotFound,
    OutOfRange,
    ResourceExhausted,
)
from ether_host.paging import Page, paginate
from ether_host.reasons import Reason
from ether_host.workflows import report
from ether_host.workflows.live_runs import LiveRuns, public, required
from ether_host.workflows.model import DETAIL_KINDS, RunState

MAX_REPORT_BYTES = 60 * 1024 * 1024
REPORT_PAGE = 1000  # tasks read from the store at a time for a report


def _beyond_the_end(run_id: str, after: int, last: int) -> OutOfRange:
    return OutOfRange(
        f"after_sequence {after} is beyond the last event ({last}) of run {run_id}, "
        "which has ended",
        reason=Reason.SEQUENCE_OUT_OF_RANGE,
        metadata={"last_sequence": str(last)},
    )


class RunReading(LiveRuns):
    """ListRuns, ListRunTasks, WaitRun, StreamRunEvents and GetRunReport, and the runs by state
    the metrics show (GetRun is ``LiveRuns.get``, which creating runs answers with too)."""

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
            runs.append(live.record.api() if live is not None else public(body))
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
        live = self._live.get(required(run_id, "run_id"))
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
        return Page([public(b) for b in bodies], token)

    @staticmethod
    def _no_stage(run_id: str, stage: str, names: list[str]) -> NotFound:
        return NotFound(
            f"run {run_id} has no stage {stage!r}; its stages: {', '.join(names)}",
            reason=Reason.STAGE_NOT_FOUND,
            resource=("stage", stage),
        )

    async def wait(self, run_id: str, limit: float | None) -> dict[str, Any]:
        """The run once it ended, or as it is after ``limit`` seconds."""
        live = self._live.get(required(run_id, "run_id"))
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
        live = self._live.get(required(run_id, "run_id"))
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

    def _stored_tasks(self, run_id: str) -> Iterator[dict[str, Any]]:
        """The run's tasks as the store holds them, in creation order, a page at a time
        (blocking: from a worker thread)."""
        seqs = self.store.task_seqs(run_id, "", "")
        for start in range(0, len(seqs), REPORT_PAGE):
            yield from (
                public(t) for t in self.store.tasks(run_id, seqs[start : start + REPORT_PAGE])
            )

    async def report(self, run_id: str, fmt: str) -> tuple[str, str, str]:
        """(content, content type, run state) of the run's report in ``fmt`` ('json' or 'markdown').

        Tasks are read from the store a page at a time (a live run's pending writes handed over
        first) and rendered in a worker thread, which stops once the report passes its bound:
        a run of 100,000 tasks is never all in memory at once for it."""
        live = self._live.get(required(run_id, "run_id"))
        if live is not None:
            run = live.record.api()
            live.writes.flush()
        else:
            run = public(await self._stored(run_id))
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
