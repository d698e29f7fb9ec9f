"""The web console in a real browser (Debian's Chromium through playwright-core): a workflow run
cancelled and resumed from its page, pages opened by their URL, refused calls shown in words, and
the navigation reached by keyboard. Screenshots go to .ether/screenshots/<scenario>/."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import terminal_pb2, workflow_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.host import HostProcess
from tests.web.support import drive
from tests.workflows.runs import (
    create,
    follow_until,
    logged,
    run_to_end,
    saw_cancel,
    stage_states,
    started,
    state,
    wait,
)

# A browser per test, and hosts that deploy the flow test agent: more than make test's 120 s per
# test on a loaded machine.
pytestmark = pytest.mark.timeout(300)

HOLDING = """\
name: holding
stages:
  - {{name: first, agent: flow, action: double, inputs: [1, 2]}}
  - {{name: wait, agent: flow, action: step, inputs: [{{hold: {tag}}}]}}
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("console-pages") / "state", http=True)
    try:
        process.wait_serving()
        deploy(process, AGENTS / "flow")
        yield process
    finally:
        process.stop()


def test_a_run_is_cancelled_from_its_page(host: HostProcess) -> None:
    """A running run's page offers Cancel (not Resume); the click cancels the run on the host, its
    holding task sees the cancel, and the page shows the run CANCELLED with its report and no
    button: a cancelled run cannot be resumed."""
    tag = f"console-{uuid.uuid4().hex[:8]}"
    run = create(host, HOLDING.format(tag=tag))
    follow_until(host, run.id, started(1, "wait"))
    shown = drive(
        "run_controls", base=host.http_address, run=run.id, before="RUNNING",
        click="#cancel-run", after="CANCELLED",
    )  # fmt: skip
    assert shown["before"] == {"cancel": True, "resume": False}
    assert shown["after"] == {"cancel": False, "resume": False}
    assert shown["problem"] == ""
    ended = wait(host, run.id)
    assert state(ended) == "CANCELLED"
    saw_cancel(host, "flow", {tag})  # the cancel reached the agent's task
    assert shown["state"].startswith("CANCELLED")
    assert dict((name, percent) for name, _state, percent in shown["stages"])["first"] == "100"
    assert "CANCELLED" in shown["report"]


def test_a_run_cut_short_by_a_restart_is_resumed_from_its_page(tmp_path: Path) -> None:
    """A host stopped mid-run leaves the run INTERRUPTED; after the restart the run's page offers
    Resume (not Cancel), and the click runs it to the end: every stage succeeds, the report
    renders, and the host counts one resume."""
    marker = tmp_path / "marker"
    spec = f"""\
name: restartable
stages:
  - {{name: first, agent: flow, action: double, inputs: [1, 2]}}
  - {{name: wait, agent: flow, action: gate, inputs: ["{marker}"], input_param: marker}}
"""
    first = HostProcess(tmp_path / "state", shared=(tmp_path,), http=True)
    second: HostProcess | None = None
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        run = create(first, spec)
        follow_until(first, run.id, started(1, "wait"))
        logged(first, "flow", "gate waiting", {str(marker)})  # holds until the restart
        assert first.stop() == 0
        second = HostProcess(tmp_path / "state", shared=(tmp_path,), http=True)
        second.wait_serving()
        watch_until(second, "flow", {"RUNNING"})  # deployed before the restart: back by itself
        shown = drive(
            "run_controls", base=second.http_address, run=run.id, before="INTERRUPTED",
            click="#resume-run", after="SUCCEEDED",
        )  # fmt: skip
        assert shown["before"] == {"cancel": False, "resume": True}
        assert shown["after"] == {"cancel": False, "resume": False}
        assert shown["problem"] == ""
        assert [(name, percent) for name, _state, percent in shown["stages"]] == [
            ("first", "100"),
            ("wait", "100"),
        ]
        ended = wait(second, run.id)
        assert state(ended) == "SUCCEEDED" and ended.resume_count == 1
        assert stage_states(ended) == {"first": "SUCCEEDED", "wait": "SUCCEEDED"}
    finally:
        (second if second is not None else first).stop()


def test_pages_open_from_their_urls(host: HostProcess) -> None:
    """An agent's page, an action's form, a run's page and a terminal's page, each opened by its
    URL in a fresh browser: each shows its content, and the navigation marks its section."""
    run = run_to_end(
        host, "name: linked\nstages:\n  - {name: a, agent: flow, action: double, inputs: [4]}\n"
    )
    terminal = host.terminals.CreateTerminal(
        terminal_pb2.CreateTerminalRequest(
            argv=terminal_pb2.Argv(args=["bash", "--norc", "--noprofile"]),
            env={"PS1": "web$ ", "HISTFILE": "/dev/null"},
            rows=24,
            cols=90,
        ),
        timeout=30,
    ).terminal
    try:
        host.terminals.WriteInput(
            terminal_pb2.WriteInputRequest(
                terminal_id=terminal.id,
                input=terminal_pb2.TerminalInput(text="echo deep-$((3*4))\n"),
            ),
            timeout=30,
        )
        shown = drive(
            "deeplinks", base=host.http_address, agent="flow", action="double", run=run.id,
            terminal=terminal.id, line="deep-12",
        )  # fmt: skip
    finally:
        host.terminals.CloseTerminal(
            terminal_pb2.CloseTerminalRequest(terminal_id=terminal.id), timeout=30
        )
    assert shown["agent"] == {"title": "flow", "nav": "Agents"}
    assert shown["form"] == {"title": "Run flow.double", "fields": ["input"]}
    assert shown["run"] == {"title": "Run linked", "state": "SUCCEEDED", "nav": "Workflows"}
    assert shown["terminal"] == {"title": f"Terminal {terminal.id}", "nav": "Terminals"}


def test_refused_calls_are_shown_in_words(host: HostProcess) -> None:
    """Pages whose call the host refuses (an unknown agent, run, terminal) show the host's
    status message and its code, never an object dumped as text."""
    unknown_run = "run-0000000000000000"
    shown = drive(
        "errors",
        base=host.http_address,
        pages=[
            ["agent", "#/agents/no-such-agent", "main [role=alert]"],
            ["form", "#/run/no-such-agent/go", "main [role=alert]"],
            ["run", f"#/workflows/{unknown_run}", "main [role=alert]"],
            ["terminal", "#/terminals/no-such-terminal", "#terminal-status.error"],
        ],
    )
    said = shown["said"]
    with pytest.raises(grpc.RpcError) as refused:
        host.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=unknown_run), timeout=30)
    for name, text in said.items():
        assert "[object" not in text, (name, text)
        assert text.endswith("(not found)"), (name, text)
    assert said["run"] == f"{refused.value.details()} (not found)"  # the same words as over gRPC
    assert "no-such-agent" in said["agent"] and "no-such-agent" in said["form"]
    assert "no-such-terminal" in said["terminal"]


def test_the_navigation_is_reached_and_used_by_keyboard(host: HostProcess) -> None:
    """From the top of a page, Tab walks to the navigation (after "Skip to content"), the focused
    link is outlined, and Enter on "Workflows" opens the workflows page."""
    shown = drive("keyboard", base=host.http_address, link="Workflows", hash="#/workflows")
    assert shown["walked"][0] == "Skip to content"
    assert shown["walked"][-2:] == ["Agents", "Workflows"]
    assert shown["visibleFocus"] != "none"
    assert shown["hash"] == "#/workflows"
    assert shown["title"] == "Workflows"
    assert shown["current"] == "Workflows"
