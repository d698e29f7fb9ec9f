"""Every List call pages by keyset: an item added or removed between two page reads never makes
a later page repeat an item or skip one that was there all along."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ether.v1 import agent_io_pb2, gateway_pb2, supervisor_pb2, terminal_pb2, workflow_pb2
from tests.gateway._support import open_session
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.host import HostProcess
from tests.terminals.support import create as create_terminal
from tests.workflows.runs import run_to_end

# One page call: (page_token) -> (item ids of the page, next_page_token).
Page = Callable[[str], tuple[list[str], str]]


def walk(page: Page, between: Callable[[], None]) -> tuple[list[str], list[str]]:
    """Read the first page, run ``between``, read the rest; the ids of the first page and of
    all the pages in order."""
    first, token = page("")
    assert token, "the list should need more than one page"
    between()
    seen = list(first)
    while token:
        ids, token = page(token)
        seen += ids
    return first, seen


def check(seen: list[str], there_all_along: set[str]) -> None:
    assert len(seen) == len(set(seen)), f"an item came back twice: {seen}"
    assert there_all_along <= set(seen), f"skipped: {there_all_along - set(seen)}"


def test_runs_created_between_pages(host: HostProcess) -> None:
    """ListRuns is newest first: a run created after page 1 is not on page 2 again."""
    deploy(host, AGENTS / "flow", name="pageflow")
    spec = "name: paging\nstages:\n  - {name: a, agent: pageflow, action: echo}\n"
    before = {run_to_end(host, spec).id for _ in range(5)}

    def page(token: str) -> tuple[list[str], str]:
        found = host.workflows.ListRuns(
            workflow_pb2.ListRunsRequest(name="paging", page_size=2, page_token=token), timeout=10
        )
        return [r.id for r in found.runs], found.next_page_token

    _, seen = walk(page, lambda: [run_to_end(host, spec) for _ in range(2)])
    check(seen, before)
    assert len(seen) == 5


def test_agents_removed_between_pages(host: HostProcess) -> None:
    """ListAgents is by name: removing an agent already read does not skip the next one."""
    names = [deploy(host, AGENTS / "worker", name=f"page-{i}", wait=False) for i in range(6)]

    def page(token: str) -> tuple[list[str], str]:
        found = host.agents.ListAgents(
            agent_io_pb2.ListAgentsRequest(page_size=2, page_token=token), timeout=10
        )
        return [a.name for a in found.agents], found.next_page_token

    removed: list[str] = []

    def remove_first_page_item() -> None:
        first = page("")[0]
        removed.append(first[0])
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=first[0]), timeout=60)

    _, seen = walk(page, remove_first_page_item)
    check(seen, set(names) - set(removed))


def test_terminals_closed_between_pages(host: HostProcess) -> None:
    """ListTerminals is by creation: a terminal that leaves the running list after page 1
    does not make page 2 skip another."""
    ids = [create_terminal(host, ["sleep", "600"], name=f"paging-{i}").id for i in range(5)]

    def page(token: str) -> tuple[list[str], str]:
        found = host.terminals.ListTerminals(
            terminal_pb2.ListTerminalsRequest(
                page_size=2, page_token=token, state=terminal_pb2.TERMINAL_STATE_RUNNING
            ),
            timeout=10,
        )
        return [t.id for t in found.terminals], found.next_page_token

    gone: list[str] = []

    def close_first() -> None:
        gone.append(page("")[0][0])
        host.terminals.CloseTerminal(
            terminal_pb2.CloseTerminalRequest(terminal_id=gone[0]), timeout=30
        )

    _, seen = walk(page, close_first)
    check(seen, set(ids) - set(gone))
    for terminal_id in set(ids) - set(gone):
        host.terminals.CloseTerminal(
            terminal_pb2.CloseTerminalRequest(terminal_id=terminal_id), timeout=30
        )


def test_sessions_opened_between_pages(host: HostProcess) -> None:
    """ListSessions is newest first: a session opened after page 1 is not on page 2 again."""
    agent = deploy(host, AGENTS / "chatter", name="pagechat")
    before = {open_session(host, agent=agent).id for _ in range(5)}

    def page(token: str) -> tuple[list[str], str]:
        found = host.gateway.ListSessions(
            gateway_pb2.ListSessionsRequest(page_size=2, page_token=token), timeout=10
        )
        return [s.id for s in found.sessions], found.next_page_token

    _, seen = walk(page, lambda: [open_session(host, agent=agent) for _ in range(2)])
    check(seen, before)
    assert set(seen) == before


@pytest.mark.parametrize("direction", ["down", "up"])
def test_processes_scaled_between_pages(host: HostProcess, direction: str) -> None:
    """ListProcesses is by agent and replica: scaling after page 1 neither repeats nor skips."""
    agent = deploy(host, AGENTS / "worker", name=f"pagescale-{direction}", replicas=4)
    for replica in range(4):
        watch_until(host, agent, {"RUNNING"}, replica=replica)

    def page(token: str) -> tuple[list[str], str]:
        found = host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent=agent, page_size=2, page_token=token),
            timeout=10,
        )
        return [f"{p.agent}/{p.replica}" for p in found.processes], found.next_page_token

    def scale() -> None:
        replicas = 3 if direction == "down" else 5
        request: Any = supervisor_pb2.ScaleAgentRequest(name=agent, replicas=replicas)
        host.supervisor.ScaleAgent(request, timeout=60)

    _, seen = walk(page, scale)
    check(seen, {f"{agent}/{i}" for i in range(3)})
