"""The console's live pages across a host restart, in a real browser (Debian's Chromium through
playwright-core): the agents page (WatchEvents), an agent's page (StreamLogs) and a run's page
(StreamRunEvents) say they are reconnecting while the host is down and catch up once it is back,
without a reload. Screenshots go to .ether/screenshots/live_restart/."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.agents import deploy, watch_until
from tests.support.calls import execute
from tests.support.host import HostProcess
from tests.web.support import drive
from tests.workflows.runs import create, follow_until, started, state, wait

# A browser with three pages, and a host stopped and started again (agents' stop grace included).
pytestmark = pytest.mark.timeout(600)

LATCH = Path(__file__).resolve().parent / "agents" / "latch"


def test_live_pages_reconnect_and_catch_up_after_a_host_restart(tmp_path: Path) -> None:
    """With the three pages open the host stops: each says "Connection lost; reconnecting". The
    host starts again on the same address: the agents page is live again with the agent RUNNING,
    the agent's page shows a line the agent logged after the restart, and the run's page shows
    the run as the restart left it (INTERRUPTED, Resume offered), all in the same page loads."""
    shared = tmp_path / "shared"
    shared.mkdir()
    pipe = shared / "never-written"
    os.mkfifo(pipe)  # the run's first task reads it: the run holds until the restart cuts it
    line = f"after-restart-{uuid.uuid4().hex[:8]}"
    first = HostProcess(tmp_path / "state", shared=(shared,), http=True)
    hosts = [first]
    try:
        first.wait_serving()
        agent = deploy(first, LATCH)
        run = create(
            first,
            f"name: held\nstages:\n  - {{name: hold, agent: {agent}, action: wait, "
            f'inputs: [1], params: {{marker: "{pipe}"}}}}\n',
        )
        follow_until(first, run.id, started(1, "hold"))
        port = urlsplit(first.http_address).port

        def stop() -> None:
            assert first.stop() == 0

        def start_again() -> None:
            second = HostProcess(
                tmp_path / "state", "--http-listen", f"127.0.0.1:{port}", shared=(shared,)
            )
            hosts.append(second)
            second.wait_serving()
            assert second.http_address == first.http_address  # the pages' origin
            watch_until(second, agent, {"RUNNING"})  # deployed before: back by itself
            said = execute(second, agent, "say", {"text": line})
            assert not said.HasField("error"), said.error

        steps = [stop, start_again]
        done: list[str] = []

        def next_step() -> None:
            step = steps[len(done)]
            step()
            done.append(step.__name__)

        shown = drive(
            "live_restart", budget=120, base=first.http_address, agent=agent, run=run.id,
            line=line, when_ready=next_step,
        )  # fmt: skip
        assert done == ["stop", "start_again"]
        for page, said in shown["said"].items():
            assert said.startswith("Connection lost; reconnecting (attempt "), (page, said)
        assert shown["notReloaded"] == [True, True, True]
        assert shown["agentsStatus"].endswith("agents, live")
        assert shown["logStatus"] == "Following"
        assert shown["log"].count(line) == 1
        assert shown["runState"] == "INTERRUPTED"
        assert shown["resume"] is True
        assert state(wait(hosts[-1], run.id)) == "INTERRUPTED"
    finally:
        for host in reversed(hosts):
            host.stop()
