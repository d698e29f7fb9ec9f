"""An agent that goes away while its term.create is under way leaves no terminal behind.

An agent's term.create runs to its end in the terminal manager even when the agent goes (its
caller is gone, not the work). The owner watcher closes what an agent owns when it goes; a
create that had not yet registered its terminal at that moment must not start one for a
gone owner (or must close it), else the terminal runs on until its idle or lifetime limit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import anyio
import grpc
import pytest
import sniffio

from ether.v1 import supervisor_pb2
from ether.v1 import terminal_pb2 as pb
from ether_host.auth import Identity
from ether_host.errors import EtherError, FailedPrecondition
from ether_host.procs import ChildRegistry
from ether_host.reasons import Reason
from ether_host.sandbox import Grant, SandboxSettings
from ether_host.terminals import AGENT_RIGHTS, TerminalManager, TerminalSettings
from ether_host.terminals.model import TerminalInfo
from ether_host.terminals.requests import CreateSpec
from tests.support.agents import deploy, remove_agent, watch_until
from tests.support.calls import execute
from tests.support.host import HostProcess

# The agent sends term.create and, once a term.list sent after it is answered (the host has
# read the create's frame and started it), exits without waiting for the create's reply.
CREATE_AND_EXIT = '''
"""Sends a term.create and exits before its reply."""
import asyncio
import os

from ether_agent import Agent, TaskContext
from ether_agent.terminal import TERMINAL_CALLS

agent = Agent(
    "leaver", version="1.0.0", description="leaves mid-create", calls=list(TERMINAL_CALLS)
)


@agent.action(description="term.create, then exit before its reply.")
async def create_and_exit(ctx: TaskContext) -> dict[str, str]:
    asyncio.get_running_loop().create_task(
        ctx.host_call("term.create", {"argv": ["sleep", "600"]})
    )
    await ctx.host_call("term.list", {})  # answered: the host has read the create too
    os._exit(0)


if __name__ == "__main__":
    agent.run()
'''

ROUNDS = 2
Result = TypeVar("Result")


@pytest.fixture(scope="module")
def leaver_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("leaver")
    (folder / "agent.py").write_text(CREATE_AND_EXIT)
    (folder / "agent.toml").write_text(
        'name = "leaver"\nlanguage = "python"\ncalls = ["term.*"]\nstop_grace = 1\n'
    )
    return folder


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_create_whose_agent_exits_meanwhile_leaves_no_terminal(
    host: HostProcess, leaver_folder: Path, round_: int
) -> None:
    """The agent exits for good right after sending term.create: either the terminal is not
    started (the host says so in its log) or it is closed `owner_gone`; the agent owns no
    terminal afterwards. Several rounds: which of the two happens depends on timing (without
    the check in the create's registering step, 3 runs of 15 left the terminal running)."""
    name = deploy(
        host, leaver_folder, name=f"leaver-{round_}", restart=supervisor_pb2.RESTART_POLICY_NEVER
    )
    owner = f"agent:{name}"
    try:
        before = len(host.records)
        with pytest.raises(grpc.RpcError) as gone:
            execute(host, name, "create_and_exit", {}, timeout=60)
        assert gone.value.code() == grpc.StatusCode.UNAVAILABLE  # the agent exited mid-task
        watch_until(host, name, {"EXITED"})
        outcome = host.wait_for_log(
            lambda r: (
                r.get("owner") == owner
                and r.get("event") in ("terminal started", "terminal not started")
            ),
            after=before,
        )
        if outcome["event"] == "terminal started":
            closed = host.wait_for_log(
                lambda r: (
                    r.get("event") == "terminal closed" and r.get("terminal") == outcome["terminal"]
                ),
                after=before,
            )
            assert closed["reason"] == "owner_gone"
        listed = host.terminals.ListTerminals(pb.ListTerminalsRequest(owner=owner), timeout=10)
        assert [t.id for t in listed.terminals if t.state != pb.TERMINAL_STATE_CLOSED] == []
    finally:
        remove_agent(host, name)


def test_a_create_whose_owner_goes_while_its_sandbox_is_made_starts_nothing(
    tmp_path: Path,
) -> None:
    """The window the test above reaches only by chance, made certain: the host's terminal
    manager itself, its owner declared gone (as the supervisor would say) while the create
    makes the terminal's sandbox. The create is refused FAILED_PRECONDITION, no terminal is
    registered or started, and its scratch directory is removed."""
    refused, sessions, scratch = _run_named(_owner_goes_during_create, tmp_path / "state")
    assert isinstance(refused, FailedPrecondition), refused
    assert refused.reason == Reason.AGENT_NOT_RUNNING and "went away" in refused.message
    assert sessions == []
    assert scratch == []


def _run_named(scenario: Callable[[Path], Awaitable[Result]], state_dir: Path) -> Result:
    """``anyio.run(scenario, state_dir)`` with the event loop named for sniffio, as the host's
    composition root names it (main.py, _name_the_event_loop): a terminal's output and exit
    callbacks run outside any task, where anyio asks sniffio which loop runs."""

    async def named() -> Result:  # named inside the run: anyio.run refuses a named thread
        before = sniffio.thread_local.name
        sniffio.thread_local.name = "asyncio"
        try:
            return await scenario(state_dir)
        finally:
            sniffio.thread_local.name = before

    return anyio.run(named)


def _manager(state_dir: Path, goes_on: int) -> tuple[TerminalManager, list[str]]:
    """The host's terminal manager, its owners' state wired by the test (hostcalls.py wires
    the supervisor's there): the owner of the ``goes_on``-th sandbox made goes as it is made.
    Returns it and the owners of the sandboxes made, in order."""
    manager = TerminalManager(TerminalSettings(), ChildRegistry(), state_dir)
    gone: set[str] = set()
    made: list[str] = []
    manager.owner_gone = gone.__contains__

    def sandbox_for(owner: str) -> tuple[Grant, SandboxSettings]:
        made.append(owner)
        if len(made) == goes_on:  # the agent goes while this create is under way, here
            gone.add(owner)
        return Grant(), SandboxSettings()

    manager.sandbox_for = sandbox_for
    return manager, made


async def _owner_goes_during_create(
    state_dir: Path,
) -> tuple[BaseException | None, list[str], list[str]]:
    manager, _ = _manager(state_dir, goes_on=1)
    identity = Identity("agent:leaver", AGENT_RIGHTS)
    refused: BaseException | None = None
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        try:
            await manager.create(identity, CreateSpec(argv=("sleep", "600")))
        except FailedPrecondition as error:
            refused = error
        sessions = list(manager.sessions)
        await manager.close_all()
        tg.cancel_scope.cancel()
    scratch_root = state_dir / "scratch" / "terminals"
    scratch = [p.name for p in scratch_root.iterdir()] if scratch_root.exists() else []
    return refused, sessions, scratch


def test_a_repeat_of_a_request_id_whose_first_create_failed_makes_the_terminal(
    tmp_path: Path,
) -> None:
    """docs/terminals.md: CreateTerminal calls repeating a `request_id` while the first is
    under way wait for it, and when it failed, try again themselves. The first (an agent's)
    fails as its owner goes while its sandbox is made; an admin's create for the same owner and
    `request_id`, begun while the first was under way, is not answered with that failure: it
    makes the terminal, the only one."""
    first, repeat, sessions, made = _run_named(_repeat_after_a_failure, tmp_path / "state")
    assert isinstance(first, FailedPrecondition), first
    assert isinstance(repeat, TerminalInfo), repeat
    assert sessions == [repeat.id] and repeat.owner == "agent:leaver"
    assert made == ["agent:leaver", "agent:leaver"]  # the repeat's sandbox after the first's


async def _repeat_after_a_failure(
    state_dir: Path,
) -> tuple[object, object, list[str], list[str]]:
    manager, made = _manager(state_dir, goes_on=1)
    spec = CreateSpec(argv=("sleep", "600"), request_id="create-1")
    outcomes: dict[str, object] = {}

    async def create(name: str, identity: Identity, spec: CreateSpec) -> None:
        try:
            outcomes[name] = await manager.create(identity, spec)
        except EtherError as error:
            outcomes[name] = error

    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        async with anyio.create_task_group() as creates:  # the first runs first, then the repeat
            creates.start_soon(create, "first", Identity("agent:leaver", AGENT_RIGHTS), spec)
            creates.start_soon(
                create, "repeat", Identity("admin"), replace(spec, owner="agent:leaver")
            )
        sessions = list(manager.sessions)
        await manager.close_all()
        tg.cancel_scope.cancel()
    return outcomes["first"], outcomes["repeat"], sessions, made
