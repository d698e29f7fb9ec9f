"""A workflow change that reaches the host while it stops (an RPC answered during the server's
grace, after the runs were interrupted) is refused as every service refuses it: UNAVAILABLE,
reason HOST_STOPPING, a retry hint, and a message that says what to do (docs/errors.md). It
was FAILED_PRECONDITION here alone, which a client's retry policy reads as "do not retry". The
workflows core runs in this process (no gRPC: the refusal is the core's own error, which
every front maps by one rule), with the real `flow` agent."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from ether_host.errors import Unavailable
from ether_host.reasons import Reason
from ether_host.workflows import Workflows
from tests.workflows.runs import core_with_flow, map_spec

HOLD = """\
name: held
stages:
  - name: wait
    agent: flow
    action: hold
    params: {tag: held}
"""


def test_creating_and_resuming_runs_while_the_host_stops_is_unavailable_cancelling_is_not(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        with anyio.fail_after(120):
            await steps()

    async def steps() -> None:
        async with core_with_flow(tmp_path / "state") as workflows:
            held = await workflows.create(None, HOLD)

            await workflows.shutdown()  # as the host does first when it stops
            interrupted = await workflows.get(held["id"])
            assert interrupted["state"] == "RUN_STATE_INTERRUPTED", interrupted

            with pytest.raises(Unavailable) as created:
                await workflows.create(None, map_spec("late", 2, 2), request_id="late-1")
            assert created.value.reason == Reason.HOST_STOPPING
            assert created.value.retry_after
            assert "once it has restarted" in created.value.message

            with pytest.raises(Unavailable) as resumed:
                await workflows.resume(held["id"], False, "")
            assert resumed.value.reason == Reason.HOST_STOPPING
            assert held["id"] in resumed.value.message

            runs = await workflows.list_runs(0, "", [], "")
            assert [run["id"] for run in runs.items] == [held["id"]]  # nothing half-made

            # A CancelRun during the grace is carried out: it starts nothing.
            cancelled = await workflows.cancel(held["id"], "during the grace", None)
            assert cancelled["state"] == "RUN_STATE_CANCELLED", cancelled

    anyio.run(scenario)


def test_a_cancel_the_stop_cuts_short_is_unavailable_and_safe_to_send_again(
    tmp_path: Path,
) -> None:
    """CancelRun of an interrupted run, its notify still running when the host's group ends:
    the caller hears UNAVAILABLE HOST_STOPPING (not a bare CANCELLED, not a hang), the run is
    CANCELLED in the store already, and the same CancelRun sent to the restarted host answers
    with it."""

    async def scenario() -> None:
        with anyio.fail_after(120):
            await steps()

    async def steps() -> None:
        state_dir = tmp_path / "state"
        async with core_with_flow(state_dir) as workflows:
            held = await workflows.create(None, HOLD)
            await workflows.shutdown()  # the run is INTERRUPTED in the store

        refused: list[Unavailable] = []
        notifying = anyio.Event()

        async def notify_that_never_ends() -> None:  # stands for the servicer's on_cancelled
            notifying.set()
            await anyio.sleep_forever()

        async def cancel_run(workflows: Workflows) -> None:
            try:
                await workflows.cancel(held["id"], "not needed", notify_that_never_ends)
            except Unavailable as error:
                refused.append(error)

        # The caller's group outlives the core's: core_with_flow's exit cancels the core's group
        # while the cancel's notify still runs, as the host's end does after its grace.
        async with anyio.create_task_group() as callers, core_with_flow(state_dir) as workflows:
            callers.start_soon(cancel_run, workflows)
            await notifying.wait()
            await workflows.shutdown()
        assert len(refused) == 1, refused
        assert refused[0].reason == Reason.HOST_STOPPING
        assert refused[0].retry_after
        assert held["id"] in refused[0].message and "again" in refused[0].message

        async with core_with_flow(state_dir) as workflows:  # the host restarted
            stored = await workflows.get(held["id"])
            assert stored["state"] == "RUN_STATE_CANCELLED", stored
            again = await workflows.cancel(held["id"], "not needed", None)
            assert again["state"] == "RUN_STATE_CANCELLED"
            assert again["error"]["message"] == "not needed"

    anyio.run(scenario)
