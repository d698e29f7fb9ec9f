"""docs/workflows.md's claims about the `ether workflow` command that had no test of their own:
what Ctrl-C does in `run` (cancels the run) and in `watch` (only detaches), exit status 4 (host
unreachable), and that the time a run spent before a host restart counts against its
`max_time` once it is resumed (`ether workflow resume`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, workflow_pb2
from tests.support.agents import AGENTS, deploy, remove_agent, watch_until
from tests.support.calls import agent_input
from tests.support.cli import Commands, Lines
from tests.support.host import ETHER, ROOT, HostProcess
from tests.workflows.runs import create, follow_until, logged, saw_cancel, started, state, wait

Start = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def cli() -> Iterator[Start]:
    """Starts `ether workflow ...` in the background against an address; none is left behind."""
    commands = Commands()
    yield lambda address, *args: commands.start(address, "workflow", *args)
    commands.close()


def ctrl_c(process: subprocess.Popen[str]) -> None:
    """The Ctrl-C a user types, sent once the command is past the run's last event so far.

    Until 53090f7 a Ctrl-C that landed inside grpc's own code (as an event arrived) could leave
    a lock of grpc's taken and the command hung after cancelling the run (4 times in ~70 tries
    timed on events); the command now follows the events in a thread of its own. The tests
    still send it after a line the command prints, as a user would."""
    os.kill(process.pid, signal.SIGINT)


def test_ctrl_c_in_run_cancels_the_run(
    host: HostProcess, flow: str, tmp_path: Path, cli: Start
) -> None:
    """Ctrl-C in `ether workflow run` cancels the run it started: the holding task gets its
    cancel frame, the run ends CANCELLED, and the command exits 1 (cancelled)."""
    tag = f"ctrl-c-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "held.yaml"
    # The hold waits until cancelled; the other task returns once the hold runs, so its task
    # line, printed as the command follows the events, comes after the run's last event.
    spec.write_text(
        "name: cli-ctrl-c\nstages:\n  - {name: wait, agent: flow, action: step, parallel: true, "
        f"inputs: [{{hold: {tag}}}, {{after_holds: 1}}]}}\n"
    )
    running = cli(host.address, "run", str(spec), "--no-report")
    assert running.stderr is not None
    lines = Lines(running.stderr)
    header = lines.wait_for(lambda line: line.startswith("started run run-"))
    run_id = header.split()[2]
    lines.wait_for(lambda line: line.startswith("✓ wait"))
    logged(host, flow, "holding", {tag})
    ctrl_c(running)
    assert running.wait(timeout=60) == 1
    # The command follows the cancelled run to its end before it exits: no wait needed.
    ended = host.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run_id), timeout=30).run
    assert state(ended) == "CANCELLED"
    saw_cancel(host, flow, {tag})
    lines.wait_for(lambda line: line.startswith(f"run {run_id} CANCELLED"))


def test_ctrl_c_in_watch_only_detaches(host: HostProcess, tmp_path: Path, cli: Start) -> None:
    """Ctrl-C in `ether workflow watch` detaches: the command exits (1, saying the run goes
    on) and the run is still RUNNING; it ends only when cancelled, by someone else."""
    # A flow agent of its own, so the holds it counts (after_holds) are this test's only.
    agent = deploy(host, AGENTS / "flow", name=f"flow-{uuid.uuid4().hex[:6]}")
    tag, later = f"watched-{uuid.uuid4().hex[:8]}", f"later-{uuid.uuid4().hex[:8]}"
    run = create(
        host,
        f"name: cli-watch-ctrl-c\nstages:\n  - {{name: wait, agent: {agent}, action: step, "
        f"parallel: true, inputs: [{{hold: {tag}}}, {{after_holds: 2}}]}}\n",
    )
    extra = None
    try:
        follow_until(host, run.id, started(2, "wait"))
        logged(host, agent, "holding", {tag})
        watcher = cli(host.address, "watch", run.id, "--no-report")
        assert watcher.stderr is not None
        lines = Lines(watcher.stderr)
        lines.wait_for(lambda line: line.startswith(f"attached to run {run.id}"))
        # A second hold lets the run's after_holds task finish: its task line is printed while
        # `watch` follows the events, so the Ctrl-C below reaches it there.
        extra = host.agents.Execute.future(
            agent_io_pb2.ExecuteRequest(input=agent_input(agent, "hold", {"tag": later})),
            timeout=120,
        )
        lines.wait_for(lambda line: line.startswith("✓ wait"))
        logged(host, agent, "holding", {later})
        ctrl_c(watcher)
        assert watcher.wait(timeout=60) == 1
        lines.wait_for(lambda line: line.startswith(f"detached from {run.id}; it goes on"))
        now = host.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run.id), timeout=30).run
        assert state(now) == "RUNNING"
        host.workflows.CancelRun(
            workflow_pb2.CancelRunRequest(run_id=run.id, reason="cancelled by the test"),
            timeout=30,
        )
        ended = wait(host, run.id)
        # Our reason, not the command's: it had not cancelled the run.
        assert state(ended) == "CANCELLED" and ended.error.message == "cancelled by the test"
        saw_cancel(host, agent, {tag})
    finally:
        if extra is not None:
            extra.cancel()
        remove_agent(host, agent)


def test_exit_4_means_the_host_is_unreachable(host: HostProcess, tmp_path: Path) -> None:
    """Exit 4 is for a host that cannot be reached, from run, watch and ls alike; a host that
    answers, even with NOT_FOUND, is exit 1."""
    spec = tmp_path / "one.yaml"
    spec.write_text("name: nowhere\nstages:\n  - {name: a, agent: flow, action: echo}\n")
    nobody = f"unix:{tmp_path / 'nobody.sock'}"  # no process listens there
    for args in (("run", str(spec)), ("watch", "run-0123"), ("ls",)):
        done = subprocess.run(
            [str(ETHER), "workflow", *args, "--address", nobody],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert done.returncode == 4, (args, done.stderr)
        assert "UNAVAILABLE" in done.stderr, (args, done.stderr)
    answered = subprocess.run(
        [str(ETHER), "workflow", "watch", "run-0123", "--address", host.address],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert answered.returncode == 1 and "NOT_FOUND" in answered.stderr, answered.stderr


MAX_TIME = 8.0  # the run's budget
BEFORE = 5.0  # at least this much of it is spent before the host restarts


def test_time_before_a_restart_counts_against_max_time(tmp_path: Path, cli: Start) -> None:
    """A run with max_time 8s spends at least 5s before its host restarts. Resumed with
    `ether workflow resume`, it gets only what is left: its hold stage is stopped by the budget
    well before 8s more have passed, the run ends PARTIAL (exit 3) with `budget_exceeded`, and
    its elapsed time is both segments together."""
    marker = tmp_path / "marker"
    tag = f"clocked-{uuid.uuid4().hex[:8]}"
    # gate waits on first sight of the marker file (until the restart cancels it) and passes at
    # once when run again on resume; the hold then waits until the budget runs out.
    spec = (
        f"name: clocked\nbudget: {{max_time: {MAX_TIME:g}s}}\nstages:\n"
        f"  - {{name: gate, agent: flow, action: gate, params: {{marker: {json.dumps(str(marker))}}}}}\n"
        f"  - {{name: hold, agent: flow, action: step, inputs: [{{hold: {tag}}}]}}\n"
    )
    first = HostProcess(tmp_path / "state", shared=(tmp_path,))
    second: HostProcess | None = None
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        run = create(first, spec)
        follow_until(first, run.id, started(1, "gate"))
        logged(first, "flow", "gate waiting", {str(marker)})
        # The claim is about time, so the run must spend some before the restart: the host's
        # own WaitRun timeout measures it out (the run is held by the gate meanwhile).
        waited = first.workflows.WaitRun(
            workflow_pb2.WaitRunRequest(
                run_id=run.id, timeout=duration_pb2.Duration(seconds=int(BEFORE))
            ),
            timeout=60,
        ).run
        assert state(waited) == "RUNNING"
        assert first.stop() == 0
        second = HostProcess(first.state_dir, shared=first.shared)
        second.wait_serving()
        watch_until(second, "flow", {"RUNNING"})  # deployed before the restart: back by itself
        cut = second.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run.id), timeout=30).run
        assert state(cut) == "INTERRUPTED"
        spent = cut.usage.elapsed.ToTimedelta().total_seconds()
        assert BEFORE <= spent < MAX_TIME

        resuming = cli(second.address, "resume", run.id, "--no-report")
        assert resuming.stderr is not None
        lines = Lines(resuming.stderr)
        lines.wait_for(lambda line: line.startswith(f"resumed run {run.id}"))
        assert resuming.wait(timeout=60) == 3  # PARTIAL: the gate succeeded, the hold did not
        ended = wait(second, run.id)
        assert state(ended) == "PARTIAL" and ended.error.code == "budget_exceeded"
        assert f"run budget max_time={MAX_TIME:g}s used up" in ended.error.message
        # The host's own account of the run, not this test's clock: both segments, one budget.
        # Had the budget started afresh on resume, the hold would have run a full MAX_TIME after
        # the first segment's BEFORE or more: a total of MAX_TIME + BEFORE at least.
        total = ended.usage.elapsed.ToTimedelta().total_seconds()
        assert MAX_TIME <= total < MAX_TIME + BEFORE
        saw_cancel(second, "flow", {tag})
        lines.wait_for(lambda line: line.startswith(f"run {run.id} PARTIAL"))
    finally:
        (second if second is not None else first).stop()
