"""A change that reaches the supervisor while the host stops (an RPC answered during the
server's grace) is refused as the host stopping (UNAVAILABLE, HOST_STOPPING), never an
INTERNAL from a closed agent store or a supervisor with no task group; and the store is closed
only once no change is being written. The supervisor core runs in this process (no gRPC: the
refusal is the core's own error, which every front maps by one rule), with a real agent."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from ether_host.errors import Unavailable
from ether_host.procs import ChildRegistry
from ether_host.reasons import Reason
from ether_host.supervisor import Supervisor
from ether_host.supervisor.store import AgentStore

WORKER = Path(__file__).resolve().parent / "worker"


def test_changes_after_the_supervisor_stopped_are_refused_as_the_host_stopping(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        with anyio.fail_after(120):
            await steps()

    async def steps() -> None:
        supervisor = Supervisor(tmp_path / "state", ChildRegistry())
        async with anyio.create_task_group() as tg:
            await tg.start(supervisor.run)
            agent = await supervisor.deploy({"path": str(WORKER), "name": "kept"})
            assert agent.name in supervisor.agents
            await supervisor.stop_all()  # as the host does before its task groups end
            tg.cancel_scope.cancel()

        with pytest.raises(Unavailable) as removed:
            await supervisor.remove("kept")
        assert removed.value.reason == Reason.HOST_STOPPING
        assert "host is stopping" in removed.value.message

        with pytest.raises(Unavailable) as deployed:
            await supervisor.deploy({"path": str(WORKER), "name": "late"})
        assert deployed.value.reason == Reason.HOST_STOPPING
        assert "late" not in supervisor.agents  # nothing half-deployed

    anyio.run(scenario)

    # What was recorded before the stop is still there for the next host.
    saved = AgentStore(tmp_path / "state" / "agents.sqlite3")
    try:
        assert [s.spec.name for s in saved.open()] == ["kept"]
    finally:
        saved.close()
