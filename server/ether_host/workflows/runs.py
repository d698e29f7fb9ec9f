"""WorkflowService's use cases: create, read, list, cancel, wait, watch, resume, report.

``Workflows`` is made of its parts: creating runs (``run_creation.py``), controlling them
(``run_control.py``) and reading them (``run_reading.py``), over the live and stored runs they
share (``live_runs.py``); here, its lifecycle (start, recovery, pruning, shutdown).

Live runs are held in memory (``RunExecution``); every change goes to the
store as it happens, and a finished run is read back from the store once
its last writes are committed. At start, runs a crashed host left running
are marked INTERRUPTED; at stop, running runs are interrupted the same way.
"""

from __future__ import annotations

import time

import anyio
import structlog
from anyio.abc import TaskStatus

from ether_host.workflows import recovery
from ether_host.workflows.engine import INTERRUPTED
from ether_host.workflows.live_runs import TRIM_AFTER_TASKS
from ether_host.workflows.run_control import RunControl
from ether_host.workflows.run_creation import RunCreation
from ether_host.workflows.run_reading import RunReading

log = structlog.get_logger("ether.workflows")

PRUNE_EVERY = 600.0  # seconds between looks for ended runs past keep_days, besides run ends
SHUTDOWN_GRACE = 10.0

# TRIM_AFTER_TASKS is read here too (tests/workflows/test_run_memory.py), as before the split.
__all__ = ["TRIM_AFTER_TASKS", "Workflows"]


class Workflows(RunCreation, RunControl, RunReading):
    """The workflow runs of one host."""

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
