"""Deployment changes made while another is being written go to the agent store together, in
one synced transaction, and each call still answers only once its own change is committed:
500 RemoveAgent calls no longer wait for 500 disk syncs in turn (bench/scale.py), and a host
started on the same state directory sees exactly what every call left. The supervisor core
runs in this process with real agents; the store is the real one, held at its first write
by the test so that the other calls pile up behind it."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from ether_host.procs import ChildRegistry
from ether_host.supervisor import Supervisor
from ether_host.supervisor.store import AgentStore

WORKER = Path(__file__).resolve().parent / "worker"


class HeldStore(AgentStore):
    """The agent store, naming the agents of each transaction; once ``armed``, its next write
    says so (``held``) and waits for ``release``."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.transactions: list[list[str]] = []
        self.armed = False
        self.held = threading.Event()
        self.release = threading.Event()

    def put(self, rows: dict[str, tuple[str, bool] | None]) -> None:
        if self.armed:
            self.armed = False
            self.held.set()
            self.release.wait(60)
        self.transactions.append(sorted(rows))
        super().put(rows)


def test_changes_waiting_behind_a_write_share_the_next_commit(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = HeldStore(state / "agents.sqlite3")

    async def scenario() -> None:
        with anyio.fail_after(120):
            await steps()

    async def steps() -> None:
        supervisor = Supervisor(state, ChildRegistry(), store=store)
        async with anyio.create_task_group() as tg:
            await tg.start(supervisor.run)
            for name in ("first", "a", "b", "c"):
                await supervisor.deploy({"path": str(WORKER), "name": name})
            store.transactions.clear()
            store.armed = True

            async with anyio.create_task_group() as calls:
                # The first of these holds the store; the rest queue behind it.
                calls.start_soon(supervisor.remove, "first")
                assert await anyio.to_thread.run_sync(store.held.wait, 60)
                calls.start_soon(supervisor.remove, "a")
                calls.start_soon(supervisor.stop, "b")
                calls.start_soon(supervisor.deploy, {"path": str(WORKER), "name": "d"})
                calls.start_soon(supervisor.scale, "c", 2)
                # Each of the four waits for the lock once its agent work is done; the lock
                # has no event for its waiters, so its statistics are polled.
                while supervisor._recording.statistics().tasks_waiting < 4:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
                store.release.set()
            assert set(supervisor.agents) == {"b", "c", "d"}
            await supervisor.stop_all()
            tg.cancel_scope.cancel()

    anyio.run(scenario)

    # One write for the first call, one for the four that waited behind it.
    assert store.transactions[:2] == [["first"], ["a", "b", "c", "d"]]
    # And what each call left is what the next host finds.
    saved = AgentStore(state / "agents.sqlite3")
    try:
        found = {s.spec.name: (s.running, s.spec.replicas) for s in saved.open()}
    finally:
        saved.close()
    assert found == {"b": (False, 1), "c": (True, 2), "d": (True, 1)}


@pytest.mark.parametrize("calls", [6])
def test_many_concurrent_changes_are_all_recorded(tmp_path: Path, calls: int) -> None:
    """Deploys and removes racing each other: every answered call's change is in the store."""
    state = tmp_path / "state"

    async def scenario() -> None:
        with anyio.fail_after(120):
            supervisor = Supervisor(state, ChildRegistry())
            async with anyio.create_task_group() as tg:
                await tg.start(supervisor.run)
                async with anyio.create_task_group() as deploys:
                    for number in range(calls):
                        deploys.start_soon(
                            supervisor.deploy, {"path": str(WORKER), "name": f"w{number}"}
                        )
                async with anyio.create_task_group() as removes:
                    for number in range(0, calls, 2):
                        removes.start_soon(supervisor.remove, f"w{number}")
                await supervisor.stop_all()
                tg.cancel_scope.cancel()

    anyio.run(scenario)
    saved = AgentStore(state / "agents.sqlite3")
    try:
        assert sorted(s.spec.name for s in saved.open()) == [f"w{n}" for n in range(1, calls, 2)]
    finally:
        saved.close()
