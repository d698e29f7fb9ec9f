"""docs/interop.md's "isError: true" for calls the host refuses, as the official MCP Python client
sees them through ``ether mcp`` (stdio) and ``/mcp`` (HTTP): a full queue and a deadline come
back as tool errors carrying the host's message, with ``_meta["ether/error_code"]`` the gRPC
status name of the refusal; the calls the queue held still answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess

from .mcp_clients import SURFACES, mcp_session
from .test_mcp_tools import BUDGET, CALCULATOR, run, saw_cancelled

NARROW = "narrow"  # tally under a name starting "narrow" runs two tasks at once (its agent.py)
DEADLINE = 2  # the deadline host's default_deadline, in seconds


@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where tally leaves a file per task it runs and waits for its gate (a file the test
    writes): a call that holds its slot until the test lets it go, with no sleep."""
    return tmp_path_factory.mktemp("mcp-gates")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, gates: Path) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("mcp-queue"), shared=(gates,), http=True)
    try:
        process.wait_serving()
        # An Ether agent declares its slots in hello (AgentSpec.max_concurrency is for MCP
        # agents): two slots, and one queue place from the spec.
        deploy(process, AGENTS / "tally", name=NARROW, max_queue=1)
        yield process
    finally:
        process.stop()


def _text(result: types.CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, types.TextContent), block
    return block.text


def _until_held(host: HostProcess, in_flight: int, queued: int) -> None:
    """Ask GetAgent again until the agent's slots and queue hold what the test sent (as
    tests/agents/test_policies.py does: each answer is a round trip, state is what is waited
    on, and BUDGET bounds it)."""
    deadline = time.monotonic() + BUDGET
    request = agent_io_pb2.GetAgentRequest(name=NARROW)
    while True:
        info = host.agents.GetAgent(request, timeout=10).agent
        if (info.in_flight, info.queued) == (in_flight, queued):
            return
        assert time.monotonic() < deadline, f"held {info.in_flight}, {info.queued} queued"


@pytest.mark.parametrize("surface", SURFACES)
def test_a_call_to_an_agent_with_a_full_queue_is_a_tool_error(
    host: HostProcess, gates: Path, surface: str
) -> None:
    """With narrow's two slots and its one queue place taken by calls waiting on a gate, one
    more tools/call answers at once isError, the text "agent narrow has 1 tasks queued (limit
    1); retry later" and ether/error_code RESOURCE_EXHAUSTED. Once the gate opens the three
    held calls answer normally, and the refused one never ran."""
    folder = gates / surface
    folder.mkdir()
    gate = folder / "gate"
    held: list[types.CallToolResult] = []
    refusals: list[types.CallToolResult] = []

    async def exchange() -> None:
        async with mcp_session(surface, host) as session, anyio.create_task_group() as tg:

            async def hold(n: int) -> None:
                arguments = {"folder": str(folder), "gate": gate.name, "n": n}
                held.append(await session.call_tool(f"{NARROW}__mark", arguments))

            for n in range(2):
                tg.start_soon(hold, n)
            await anyio.to_thread.run_sync(_until_held, host, 2, 0)
            tg.start_soon(hold, 2)  # sent after the slots are taken: it must wait in the queue
            await anyio.to_thread.run_sync(_until_held, host, 2, 1)
            arguments = {"folder": str(folder), "gate": gate.name, "n": 3}
            refusals.append(await session.call_tool(f"{NARROW}__mark", arguments))
            await anyio.to_thread.run_sync(gate.write_text, "open\n")

    try:
        run(exchange())
    finally:  # a failed exchange leaves no call holding narrow's slots for the next test
        gate.write_text("open\n")
    [refused] = refusals
    assert refused.is_error
    assert _text(refused) == f"agent {NARROW} has 1 tasks queued (limit 1); retry later"
    assert refused.meta is not None
    assert refused.meta["ether/error_code"] == "RESOURCE_EXHAUSTED"
    assert refused.meta["ether/status"] == "ERROR"
    # Nothing lost: each held call got its own task's result, and only those three ran.
    assert [r.is_error for r in held] == [False, False, False]
    task_ids = {r.structured_content["task_id"] for r in held if r.structured_content}
    assert task_ids == {r.meta["ether/task_id"] for r in held if r.meta}
    assert len(task_ids) == 3
    assert sorted(p.name.split(".")[0] for p in folder.glob("*.ran")) == sorted(task_ids)


@pytest.fixture(scope="module")
def hurried(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A host whose calls without a deadline of their own get DEADLINE seconds. The tests' own
    gRPC calls all set a deadline, so only the MCP calls get this one."""
    folder = tmp_path_factory.mktemp("mcp-deadline")
    process = HostProcess(folder, "--default-deadline", str(DEADLINE), http=True)
    try:
        process.wait_serving()
        deploy(process, CALCULATOR)
        yield process
    finally:
        process.stop()


@pytest.mark.parametrize("surface", SURFACES)
def test_a_call_whose_deadline_passes_is_a_tool_error_and_its_task_cancelled(
    hurried: HostProcess, surface: str
) -> None:
    """A call of calculator__wait (which waits until cancelled) whose time runs out: on /mcp
    the host's default_deadline (2 s here), through ether mcp its --timeout 2. It answers
    isError, the text "task ID on agent calculator did not finish before its deadline" and
    ether/error_code DEADLINE_EXCEEDED; the agent's task is cancelled (it logs so)."""
    logs = hurried.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent="calculator", tail_lines=0, follow=True),
        timeout=BUDGET,
    )
    label = f"past-its-deadline-{surface}"
    flags = ("--timeout", str(DEADLINE))

    async def called() -> types.CallToolResult:
        # calculator__wait never ends by itself: a call that no deadline ends fails here.
        with anyio.fail_after(BUDGET):
            async with mcp_session(surface, hurried, flags=flags) as session:
                return await session.call_tool("calculator__wait", {"label": label})

    try:
        late = run(called())
        assert late.is_error
        assert late.meta is not None
        assert late.meta["ether/error_code"] == "DEADLINE_EXCEEDED"
        task_id = late.meta["ether/task_id"]
        message = f"task {task_id} on agent calculator did not finish before its deadline"
        assert _text(late) == message
        saw_cancelled(logs, label)
    finally:
        logs.cancel()  # a no-op once saw_cancelled has ended it


def test_without_timeout_ether_mcp_calls_are_not_held_to_default_deadline(
    hurried: HostProcess,
) -> None:
    """ether mcp's calls are ExecuteStreams, which get no default deadline (docs/limits.md): on
    the host whose default_deadline is 2 s, a call lingering 3 s answers its result."""

    async def called() -> types.CallToolResult:
        async with mcp_session("stdio", hurried) as session:
            return await session.call_tool("calculator__linger", {"ms": 3000})

    answered = run(called())
    assert not answered.is_error, answered.content
    assert answered.structured_content == {"lingered": 3000}, answered.structured_content
