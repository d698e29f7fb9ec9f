"""The console's live pages across a host restart, in a real browser (Debian's Chromium through
playwright-core): the agents page (WatchEvents), an agent's page (StreamLogs) and a run's page
(StreamRunEvents) say they are reconnecting while the host is down and catch up once it is back,
without a reload. Screenshots go to .ether/screenshots/live_restart/."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ether.v1 import gateway_pb2, supervisor_pb2, terminal_pb2
from tests.gateway._support import Conversation, open_session, reply_text
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import execute, struct
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


HOLDGATE = Path(__file__).resolve().parent / "agents" / "holdgate"


def bash_terminal(host: HostProcess, name: str) -> str:
    made = host.terminals.CreateTerminal(
        terminal_pb2.CreateTerminalRequest(
            argv=terminal_pb2.Argv(args=["bash", "--norc", "--noprofile"]), name=name
        ),
        timeout=30,
    )
    return str(made.terminal.id)


def denied_fetch(host: HostProcess, agent: str, path: str) -> None:
    """An egress refusal, recorded in the audit log (the agent has no egress policy)."""
    output = execute(host, agent, "get", {"url": f"http://127.0.0.1:9/{path}"})
    assert output.error.code == "host_not_allowed", output


def test_the_other_live_views_reconnect_and_catch_up_after_a_host_restart(
    tmp_path: Path,
) -> None:
    """The terminal list, a session's chat and context, the audit, a running action and an
    agent's header, open in one browser while the host stops and starts again on the same
    address. While the pages are held off the restarted host, the test changes what each shows:
    a new terminal (the one before is gone with the old host), a message in the session from
    another client, a context key, an egress refusal, the agent scaled to two replicas. Let go,
    each view catches up by itself without a reload: the list re-read; the chat resumed after
    its last event (the turn the restart cut short ends with `host_restarted`, the other
    client's turn shows, nothing shown twice, and a message typed afterwards is answered); the
    context re-read; the audit's new refusal once, the old one not repeated; the header at 2/2
    replicas; and the action's page says the host restarted while its task ran, naming the
    task, since an Execute cannot be resumed."""
    shared = tmp_path / "shared"
    shared.mkdir()
    pipe = shared / "never-written"
    os.mkfifo(pipe)  # the action's task reads it: it runs until the host stops under it
    first = HostProcess(tmp_path / "state", shared=(shared,), http=True)
    hosts = [first]
    try:
        first.wait_serving()
        latch = deploy(first, LATCH)
        gate = deploy(first, HOLDGATE)
        fetcher = deploy(first, AGENTS / "toolbox", name="reconnect-fetcher")
        session = open_session(first, agent=gate, context={"user": "ada"})
        before_terminal = bash_terminal(first, "before")
        denied_fetch(first, fetcher, "before")
        port = urlsplit(first.http_address).port
        context_key = f"resumed_{uuid.uuid4().hex[:8]}"
        after: dict[str, str] = {}

        def stop() -> None:
            assert first.stop() == 0

        def start_again_and_change_everything() -> None:
            second = HostProcess(
                tmp_path / "state", "--http-listen", f"127.0.0.1:{port}", shared=(shared,)
            )
            hosts.append(second)
            second.wait_serving()
            assert second.http_address == first.http_address  # the pages' origin
            for agent in (latch, gate, fetcher):
                watch_until(second, agent, {"RUNNING"})  # deployed before: back by themselves
            after["terminal"] = bash_terminal(second, "after")
            second.gateway.UpdateContext(
                gateway_pb2.UpdateContextRequest(
                    session_id=session.id, set=struct({context_key: True})
                ),
                timeout=30,
            )
            denied_fetch(second, fetcher, "after")
            other = Conversation(second, session.id)
            try:
                assert reply_text(other.turn("while-away")) == "echo: while-away"
            finally:
                other.close()
            second.supervisor.ScaleAgent(
                supervisor_pb2.ScaleAgentRequest(name=latch, replicas=2), timeout=30
            )
            watch_until(second, latch, {"RUNNING"}, replica=1)

        steps = [stop, start_again_and_change_everything]
        done: list[str] = []

        def next_step() -> None:
            step = steps[len(done)]
            step()
            done.append(step.__name__)

        shown = drive(
            "live_restart_views", budget=120, base=first.http_address, agent=latch,
            session=session.id, marker=str(pipe), before_terminal=before_terminal,
            after_name="after", context_key=context_key,
            when_ready=next_step,
        )  # fmt: skip
        assert done == ["stop", "start_again_and_change_everything"]
        every = dict.fromkeys(("terminals", "chat", "context", "audit", "agent", "action"), True)
        # Each view said it lost the connection, then caught up.
        outcomes = {"lost": shown["lost"], "caught up": shown["views"]}
        assert outcomes == {"lost": every, "caught up": every}, json.dumps(outcomes, indent=1)
        assert all(shown["notReloaded"].values()), shown["notReloaded"]
        # The list as the restarted host has it: the terminal of the old host is gone.
        assert shown["terminals"] == [after["terminal"]]
        assert shown["terminalsStatus"] == "1 terminals, live"
        # The chat: every event once, in order, the cut-short turn's end included.
        texts = [text for _who, text in shown["chat"]]
        for said in ("echo: hello", "echo: while-away", "echo: after"):
            assert texts.count(said) == 1, texts
        [cut] = [text for who, text in shown["chat"] if who == "error"]
        assert "host_restarted" in cut and "send the message again" in cut
        assert texts.index("hold") < texts.index(cut) < texts.index("echo: while-away")
        assert json.loads(shown["context"]) == {"user": "ada", context_key: True}
        assert shown["contextVersion"] == "version 2"
        assert len(shown["audit"]) == len(set(shown["audit"])) == 2  # the old one not repeated
        assert shown["header"] == "2/2 replicas"
        task = shown["taskLine"].split("task ", 1)[1].split(",", 1)[0]
        assert task in shown["lostAction"]
        assert shown["action"].startswith("The host restarted at ")
        assert f"while task {task} ran. An Execute cannot be resumed" in shown["action"]
    finally:
        for host in reversed(hosts):
            host.stop()
