"""What a person notices in the web console, in a real browser (Debian's Chromium through
playwright-core): every page readable at a phone's 390 px and at 1280x800, with real data behind
it, and pages that stay still while their streams update them (Chromium's Layout Instability
API). Screenshots go to .ether/screenshots/<scenario>/ (ETHER_SCREENSHOTS to move them)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ether.v1 import supervisor_pb2, terminal_pb2
from tests.gateway._support import Conversation, open_session
from tests.support.agents import AGENTS, EXAMPLES, deploy, until
from tests.support.calls import execute
from tests.support.host import ROOT, HostProcess
from tests.web.support import drive
from tests.workflows.runs import create, run_to_end, state, wait

# A browser per test (the layout test opens 22 pages), and a module host that deploys the example
# agents first (the report agent compiles its TypeScript): minutes on a loaded machine.
pytestmark = pytest.mark.timeout(600)

HERE = Path(__file__).resolve().parent
SIZES = [[390, 844], [1280, 800]]
# The sum of the shifts no input caused, from the first update to the last: ~0. For scale, one
# 20 px table row pushed down in a phone's window scores ~0.002, a table header moved 8 px
# sideways ~0.0002 (Chromium's own "good" for a page's whole life is 0.1).
STILL = 0.0001


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-layout-shared")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, shared: Path) -> Iterator[HostProcess]:
    process = HostProcess(
        tmp_path_factory.mktemp("console-layout") / "state", shared=(shared,), http=True
    )
    try:
        process.wait_serving()
        for name in ("scout", "wordcount", "report", "concierge"):
            deploy(process, EXAMPLES / name)
        deploy(process, HERE / "agents" / "latch")
        yield process
    finally:
        process.stop()


def code_review_spec(first: dict[str, Any] | None = None) -> str:
    """examples/workflows/code_review.yaml, with ``first`` as a stage before its own."""
    spec = yaml.safe_load((ROOT / "examples" / "workflows" / "code_review.yaml").read_text())
    if first is not None:
        spec["stages"].insert(0, first)
    return yaml.safe_dump(spec, sort_keys=False)


def test_every_page_is_readable_at_a_phone_and_a_laptop_width(host: HostProcess) -> None:
    """Each page, opened by its URL with real data behind it (the example agents, a finished code
    review run with its report, a terminal, a session with one turn, an egress refusal), at
    390x844 and 1280x800: nothing scrolls sideways, the heading and the page's main controls are
    inside the window, not covered and not cut off, and no text runs out of its box (wide tables
    scroll inside their own container)."""
    run = run_to_end(host, code_review_spec())
    assert state(run) == "SUCCEEDED"
    terminal = host.terminals.CreateTerminal(
        terminal_pb2.CreateTerminalRequest(
            argv=terminal_pb2.Argv(args=["bash", "--norc", "--noprofile"]),
            env={"PS1": "web$ ", "HISTFILE": "/dev/null"},
            rows=24,
            cols=90,
        ),
        timeout=30,
    ).terminal
    session = open_session(host, capability="concierge")
    talk = Conversation(host, session.id)
    try:
        talk.turn("What is in examples/agents/scout?")
    finally:
        talk.close()
    fetcher = deploy(host, AGENTS / "toolbox", name="layout-fetcher")  # no egress policy
    refused = execute(host, fetcher, "get", {"url": "http://127.0.0.1:9/a-rather-long/path/to/see"})
    assert refused.error.code == "host_not_allowed"
    tid, sid = terminal.id, session.id
    pages = [
        page("agents", "#/agents", 'tr[data-agent="scout"] td.state:has-text("RUNNING")',
             'tr[data-agent="scout"] a', ".table-wrap", "header .brand", "header a[data-nav=audit]"),
        page("agent", "#/agents/scout", "table[aria-label=Processes] tbody tr",
             "section.card a.button", ".table-wrap:has(table[aria-label=Processes])", "pre.log"),
        page("action-form", "#/run/scout/analyze_file", "form.schema",
             "form.schema input", "form.schema button[type=submit]", "form.schema button[type=button]"),
        page("workflows", "#/workflows", f'tr[data-run="{run.id}"]',
             f'tr[data-run="{run.id}"] a', "#spec", "form[aria-label='New run'] button[value=start]",
             "#check-spec"),
        page("run", f"#/workflows/{run.id}", "#report h1",
             "#run-state", "[data-stage] progress", "#report"),
        page("terminals", "#/terminals", f'tr[data-terminal="{tid}"]',
             f'tr[data-terminal="{tid}"] a', "#new-command",
             "form[aria-label='New terminal'] button[type=submit]"),
        page("terminal", f"#/terminals/{tid}", "#terminal[data-attached=true]",
             "#terminal-status", "#record", "#download-cast", "#terminal"),
        page("sessions", "#/sessions", f'tr[data-session="{sid}"]',
             f'tr[data-session="{sid}"] a', "#session-target",
             "form[aria-label='Open a session'] button[type=submit]"),
        page("session", f"#/sessions/{sid}", "#chat li.chat-concierge",
             "#message", "form.chat-form button[type=submit]", "#context"),
        page("audit", "#/audit", f'tr[data-audit]:has-text("{fetcher}")',
             "tr[data-audit] td.state", ".table-wrap"),
        page("sign-in", "#/sign-in", "#token", "#token", "form[aria-label='Sign in'] button"),
    ]  # fmt: skip
    try:
        shown = drive("layout", budget=120, base=host.http_address, pages=pages, sizes=SIZES)
    finally:
        host.terminals.CloseTerminal(terminal_pb2.CloseTerminalRequest(terminal_id=tid), timeout=30)
    problems = shown["problems"]
    assert sorted(problems) == sorted(f"{p['name']}@{w}" for p in pages for w, _h in SIZES)
    wrong = {where: found for where, found in problems.items() if found}
    assert not wrong, "\n".join(
        f"{where}: {problem}" for where in wrong for problem in wrong[where]
    )


def page(name: str, hash: str, ready: str, *controls: str) -> dict[str, Any]:
    return {"name": name, "hash": hash, "ready": ready, "controls": list(controls)}


def unasked(shifts: list[dict[str, Any]]) -> float:
    """The sum of the shifts no input of the person's came just before (none here: the page is
    only watched)."""
    return float(sum(shift["value"] for shift in shifts if not shift["hadRecentInput"]))


def moved(shifts: list[dict[str, Any]]) -> str:
    """What moved, for a failure's message: each shift's value and its elements' from and to
    rectangles (x, y, width, height)."""
    return "\n".join(
        f"{shift['value']:.4f}: "
        + "; ".join(f"{s['node']} {s['from']} -> {s['to']}" for s in shift["sources"])
        for shift in shifts
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}px")
def test_the_agents_page_stays_still_while_agents_change(
    host: HostProcess, size: list[int]
) -> None:
    """With the agents page open, an agent is deployed (installing, starting, running), scaled to
    two replicas and stopped: the page follows every change through WatchEvents, and nothing on
    it moves (no row pushed down, no column widening as a state's name changes)."""
    name = f"shift-{size[0]}"

    def deploy_it() -> None:
        deploy(host, EXAMPLES / "wordcount", name=name)

    def scale_it() -> None:
        scaled = host.supervisor.ScaleAgent(
            supervisor_pb2.ScaleAgentRequest(name=name, replicas=2), timeout=30
        )
        until(host, scaled.agent, {"RUNNING"}, replica=1)

    def stop_it() -> None:
        host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name=name), timeout=60)

    changes = [deploy_it, scale_it, stop_it]
    made: list[str] = []

    def next_change() -> None:  # the page showed the last change: make the next one
        change = changes[len(made)]
        change()
        made.append(change.__name__)

    shown = drive(
        "shift_agents", budget=120, base=host.http_address, size=size,
        agents=["scout", "wordcount", "report"],
        steps=[{name: ["RUNNING", "1/1"]}, {name: ["RUNNING", "2/2"]}, {name: ["STOPPED", "0/2"]}],
        when_ready=next_change,
    )  # fmt: skip
    assert made == ["deploy_it", "scale_it", "stop_it"]
    assert name in shown["rows"]
    print(f"layout shifts: {unasked(shown['shifts']):.5f}\n{moved(shown['shifts'])}")
    assert unasked(shown["shifts"]) < STILL, moved(shown["shifts"])


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}px")
def test_a_runs_page_stays_still_while_its_tasks_complete(
    host: HostProcess, shared: Path, size: list[int]
) -> None:
    """A code review run whose first stage waits until the run's page is open: then its 21 tasks
    complete, each stage's bar fills, the tasks list grows and the report renders, and nothing
    the page showed before moves."""
    marker = shared / f"go-{uuid.uuid4().hex[:8]}"
    first = {
        "name": "wait",
        "agent": "latch",
        "action": "wait",
        "inputs": [1],
        "params": {"marker": str(marker)},
    }
    os.mkfifo(marker)
    run = create(host, code_review_spec(first))

    def let_it_go() -> None:  # blocks until the held task reads the pipe
        marker.write_text("go")

    shown = drive(
        "shift_run", budget=120, base=host.http_address, size=size, run=run.id,
        when_ready=let_it_go,
    )  # fmt: skip
    ended = wait(host, run.id)
    assert state(ended) == "SUCCEEDED"
    assert shown["stages"] == [
        ["wait", "100"],
        ["explore", "100"],
        ["analyze", "100"],
        ["report", "100"],
    ]
    assert shown["tasksShown"] == ended.tasks.total  # every task came while the page watched
    print(f"layout shifts: {unasked(shown['shifts']):.5f}\n{moved(shown['shifts'])}")
    assert unasked(shown["shifts"]) < STILL, moved(shown["shifts"])
