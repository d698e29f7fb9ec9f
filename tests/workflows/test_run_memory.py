"""A run's memory goes back when it ends: its records are freed at once (not left to the
cyclic collector), and after a large run the host hands what glibc's allocator kept back to the
OS (workflows/live_runs.py, heap_trim.py; bench/map_scale.py measures how much)."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import anyio
import pytest

from ether_host.workflows.engine import RunExecution
from ether_host.workflows.model import TaskRecord
from ether_host.workflows.runs import TRIM_AFTER_TASKS
from tests.support.host import HostProcess
from tests.workflows.runs import core_with_flow, map_spec, run_to_end, state


def _alive() -> list[object]:
    return [o for o in gc.get_objects() if isinstance(o, (RunExecution, TaskRecord))]


def test_a_runs_records_are_freed_as_it_ends_not_by_the_cyclic_collector(tmp_path: Path) -> None:
    """With the cyclic collector off, a 200-task map run in this process leaves none of its
    records alive once it ended: nothing holds them in a reference cycle (the batch path's
    per-task callbacks did, and an idle host kept a 100,000-task run until the collector's next
    full pass). The host's core runs in this process, with the real `flow` agent."""
    state_dir = tmp_path / "state"

    async def scenario() -> None:
        with anyio.fail_after(120):
            await steps()

    async def steps() -> None:
        async with core_with_flow(state_dir) as workflows:
            run = await workflows.create(None, map_spec("freed", 200, 16))
            ended = await workflows.wait(run["id"], None)
            assert ended["state"] == "RUN_STATE_SUCCEEDED"
            assert ended["tasks"]["succeeded"] == 200

    # Another test's run in this process may have left records for the collector (one the
    # host's stop interrupted, say): collected first, so only this run's are looked at.
    gc.collect()
    assert not _alive(), "records of an earlier run are alive: the check below would mean little"
    gc.disable()
    try:
        anyio.run(scenario)
        left = _alive()
        assert not left, f"{len(left)} records of the ended run are still alive"
    finally:
        gc.enable()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim: Linux")
def test_the_host_trims_its_heap_after_a_large_run(host: HostProcess, flow: str) -> None:
    """A run of TRIM_AFTER_TASKS tasks ends with the host's line saying how many bytes its heap
    trim handed back to the OS; a smaller run before it trims nothing."""
    mark = len(host.records)
    small = run_to_end(host, map_spec("small", 10, 16))
    large = run_to_end(host, map_spec("large", TRIM_AFTER_TASKS, 16))
    assert state(small) == state(large) == "SUCCEEDED"
    trimmed = host.wait_for_log(
        lambda r: r.get("event") == "heap trimmed after a large run", after=mark
    )
    assert trimmed["run_id"] == large.id  # the first such line: none for the small run
    assert trimmed["tasks"] == TRIM_AFTER_TASKS
    assert isinstance(trimmed["released_bytes"], int)
