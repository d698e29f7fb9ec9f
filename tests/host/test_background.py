"""background.run_to_the_end: work an RPC must not leave half-done goes on when its caller is
cancelled; what it raises is the caller's, or, once the caller has gone, a log line (the only
trace left of it: the run's notify not watched, a terminal not recorded)."""

from __future__ import annotations

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from anyio.abc import TaskGroup
from structlog.testing import capture_logs

from ether_host.background import Abandoned, run_to_the_end

FAILED = "work its caller left failed at its end"


def test_work_goes_on_after_its_caller_left_and_a_failure_at_its_end_is_logged() -> None:
    finished: list[str] = []

    async def main() -> None:
        started, release = anyio.Event(), anyio.Event()

        async def work() -> None:
            started.set()
            await release.wait()
            finished.append("work")
            raise RuntimeError("the record could not be written")

        async with anyio.create_task_group() as tg:
            async with anyio.create_task_group() as callers:
                callers.start_soon(run_to_the_end, tg, work)
                await started.wait()
                callers.cancel_scope.cancel()  # the caller goes (its client cancelled)
            release.set()

    with capture_logs() as logs:
        anyio.run(main)
    assert finished == ["work"]
    failures = [entry for entry in logs if entry["event"] == FAILED]
    assert len(failures) == 1, logs
    assert failures[0]["error"] == "the record could not be written"
    assert failures[0]["error_type"] == "RuntimeError"
    assert failures[0]["work"].endswith("work")


def test_a_caller_that_waits_gets_the_error_and_nothing_is_logged() -> None:
    async def main() -> None:
        async def work() -> None:
            await anyio.lowlevel.checkpoint()
            raise ValueError("refused")

        async with anyio.create_task_group() as tg:
            with pytest.raises(ValueError, match="refused"):
                await run_to_the_end(tg, work)

    with capture_logs() as logs:
        anyio.run(main)
    assert not [entry for entry in logs if entry["event"] == FAILED]


def test_work_asked_for_as_its_group_is_cancelled_cleans_up_and_the_caller_hears_abandoned() -> (
    None
):
    """The host stopping cancels the service's group; a request that asks for work in it at that
    moment is answered Abandoned at once (the services answer UNAVAILABLE, HOST_STOPPING), not
    left waiting, and the work's own cleanup (its ``finally``: a request id let go) runs even
    though the group was cancelled before the work's first step."""
    cleaned: list[str] = []

    async def main() -> None:
        async def work() -> None:
            try:
                await anyio.lowlevel.checkpoint()
            finally:
                cleaned.append("request id let go")

        async def own_group(*, task_status: anyio.abc.TaskStatus[TaskGroup]) -> None:
            async with anyio.create_task_group() as group:
                task_status.started(group)
                await anyio.sleep_forever()

        async with anyio.create_task_group() as host:
            group = await host.start(own_group)
            group.cancel_scope.cancel()  # the host stops
            with anyio.fail_after(5):  # a hang here is the failure
                with pytest.raises(Abandoned):
                    await run_to_the_end(group, work)
            host.cancel_scope.cancel()

    anyio.run(main)
    assert cleaned == ["request id let go"]
