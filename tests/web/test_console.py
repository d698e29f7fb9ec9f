"""The web console in a real browser (Debian's Chromium through playwright-core) against a real
host with the example agents: the agents page, an action run from its generated form, a
terminal typed into through xterm.js and watched read-only, and sign-in on a host with tokens.
Screenshots go to .ether/screenshots/<scenario>/ (ETHER_SCREENSHOTS to move them)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ether.v1 import agent_io_pb2, terminal_pb2
from tests.support.agents import AGENTS, EXAMPLES, deploy
from tests.support.calls import execute
from tests.support.host import ROOT, HostProcess
from tests.web.support import drive

# A browser per test, and a module host that deploys four example agents first (the report
# agent compiles its TypeScript): more than make test's 120 s per test on a loaded machine.
pytestmark = pytest.mark.timeout(300)

EXAMPLE_AGENTS = ("scout", "wordcount", "report")
TOKEN = "console-admin-token-0123456789"
READER = "console-reader-token-0123456789"
WATCHER = "console-watcher-token-0123456789"  # may see and attach to its terminals, not type


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("console") / "state", http=True)
    try:
        process.wait_serving()
        for name in (*EXAMPLE_AGENTS, "concierge"):
            deploy(process, EXAMPLES / name)
        yield process
    finally:
        process.stop()


def bash_terminal(host: HostProcess) -> terminal_pb2.Terminal:
    """A bash terminal made over gRPC, for a test to open in the console."""
    return host.terminals.CreateTerminal(
        terminal_pb2.CreateTerminalRequest(
            argv=terminal_pb2.Argv(args=["bash", "--norc", "--noprofile"]),
            env={"PS1": "web$ ", "HISTFILE": "/dev/null"},
            cwd="/tmp",
            rows=24,
            cols=90,
        ),
        timeout=30,
    ).terminal


def test_the_agents_page_lists_the_example_agents_running(host: HostProcess) -> None:
    shown = drive("agents", base=host.http_address, agents=list(EXAMPLE_AGENTS))
    rows = {row[0]: row[1:] for row in shown["rows"]}
    assert rows["scout"] == ["RUNNING", "python", "1/1", "0", "0"]
    assert rows["wordcount"] == ["RUNNING", "go", "1/1", "0", "0"]
    assert rows["report"] == ["RUNNING", "typescript", "1/1", "0", "0"]
    # At a phone's width the page fits: nothing scrolls sideways.
    assert shown["overflow"] <= 0
    assert shown["firstTab"] == "Skip to content"
    assert shown["hash"] == "#/agents/scout"  # reached by keyboard; the agent's page is a link
    assert shown["background"] == "rgb(21, 23, 26)"  # dark, as the system asked


def test_scout_analyze_file_runs_from_its_generated_form(host: HostProcess) -> None:
    readme = ROOT / "README.md"
    shown = drive(
        "run", base=host.http_address, agent="scout", action="analyze_file", field="path",
        value=str(readme),
    )  # fmt: skip
    # Left empty, the required field is refused where it is, before any call.
    assert shown["fieldError"] == "required"
    assert shown["sentBeforeValid"] == ""
    output = json.loads(shown["output"])
    assert output["path"] == str(readme)
    assert output["lines"] == len(readme.read_text(encoding="utf-8").splitlines())
    assert shown["state"].startswith("success")


def test_the_code_review_workflow_runs_from_pasted_yaml(host: HostProcess) -> None:
    spec = (ROOT / "examples" / "workflows" / "code_review.yaml").read_text(encoding="utf-8")
    broken = "name: broken\nstages:\n  - name: one\n    agent: [scout\n"
    shown = drive("workflow", base=host.http_address, spec=spec, broken_spec=broken)
    # The broken spec is refused with the host's message, its line marked in the text.
    where = re.search(r"line (\d+), column \d+", shown["brokenMessage"])
    assert where, shown["brokenMessage"]
    assert shown["brokenMessage"].startswith("YAML syntax error in spec_text")
    assert shown["brokenMessage"].endswith("(invalid argument)")
    assert shown["markedLine"].split()[:2] == [where.group(1), ">"]
    # Every stage of the real one reached 100 %, and the report rendered as HTML.
    assert shown["stages"] == [["explore", "100"], ["analyze", "100"], ["report", "100"]]
    assert shown["reportTitle"]
    assert shown["tasksShown"] > 0


def test_a_generated_form_checks_every_kind_of_field_before_sending(host: HostProcess) -> None:
    agent = deploy(host, Path(__file__).parent / "agents" / "order_form")
    shown = drive("form", base=host.http_address, agent=agent, action="order")
    errors = dict(shown["errors"])
    assert errors == {
        "item": "at least 2 characters",
        "quantity": "at most 10",
        "city": "required",
        "zip": "must match ^[0-9]{5}$",
    }
    assert shown["focused"] == shown["errors"][0][0]  # the first field to fix has the focus
    # Values of the wrong type are refused at their fields too, still before anything is sent.
    type_errors = dict(shown["typeErrors"])
    assert type_errors["quantity"] == "a whole number"
    assert type_errors["price"] == "not a number"
    assert "quantity: a whole number" in shown["summary"]
    assert "price: not a number" in shown["summary"]
    assert shown["sentWhileInvalid"] == ""
    assert json.loads(shown["output"]) == {
        "item": "tea",
        "quantity": 3,
        "price": 2.5,
        "gift": True,
        "speed": "express",
        "tags": ["green", "loose"],
        "address": {"city": "Lyon", "zip": "69001"},
    }


def test_a_terminal_typed_in_xterm_and_watched_read_only(host: HostProcess) -> None:
    shown = drive("terminal", base=host.http_address)
    # What the browser typed reached the terminal: the host's own screen shows the command and
    # its output.
    screen = host.terminals.ReadScreen(
        terminal_pb2.ReadScreenRequest(terminal_id=shown["id"]), timeout=30
    ).screen
    lines = [line.rstrip() for line in screen.lines]
    assert "console-ok" in lines
    assert any(line.endswith("echo console-ok") for line in lines)
    # The second page saw the same output, was attached read-only, and its keys went nowhere.
    assert shown["viewerReadOnly"] == "true"
    assert "read-only" in shown["viewerStatus"]
    assert "console-ok" in [line.rstrip() for line in shown["viewerText"].splitlines()]
    assert "after-viewer" in lines
    assert not any("viewer-typed" in line for line in lines)
    # Pasted text ran; after the window shrank, the program saw xterm.js's size.
    rows, cols = shown["size"]  # the driver saw `stty size` print them
    assert cols < 80
    # The host's own record of the terminal's size followed the window too.
    now = host.terminals.GetTerminal(
        terminal_pb2.GetTerminalRequest(terminal_id=shown["id"]), timeout=30
    ).terminal
    assert (now.rows, now.cols) == (rows, cols)
    assert "pasted-ok" in [line.rstrip() for line in shown["writerText"].splitlines()]
    host.terminals.CloseTerminal(terminal_pb2.CloseTerminalRequest(terminal_id=shown["id"]))


def test_a_terminal_recorded_downloaded_and_played_back_in_the_console(
    host: HostProcess,
) -> None:
    """Start recording on the terminal's page, type; the download button yields a .cast file
    (asciicast v2 with what was typed and printed) and the playback page shows the output."""
    terminal = host.terminals.CreateTerminal(
        terminal_pb2.CreateTerminalRequest(
            argv=terminal_pb2.Argv(args=["bash", "--norc", "--noprofile"]),
            env={"PS1": "rec$ ", "HISTFILE": "/dev/null"},
            cwd="/tmp",
            rows=24,
            cols=90,
        ),
        timeout=30,
    ).terminal
    try:
        shown = drive("recording", base=host.http_address, id=terminal.id)
        assert shown["filename"] == f"{terminal.id}.cast"
        lines = Path(shown["saved"]).read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        # The page fitted the terminal to its window before recording started: that size.
        now = host.terminals.GetTerminal(
            terminal_pb2.GetTerminalRequest(terminal_id=terminal.id), timeout=30
        ).terminal
        assert header["version"] == 2
        assert (header["width"], header["height"]) == (now.cols, now.rows) == tuple(shown["size"])
        events = [json.loads(line) for line in lines[1:]]
        output = "".join(text for _, kind, text in events if kind == "o")
        assert "echo played-$((6*7))" in output and "played-42\r\n" in output
        assert "played-42" in [line.rstrip() for line in shown["playbackText"].splitlines()]
        assert shown["playbackStatus"].startswith("Played")
    finally:
        host.terminals.CloseTerminal(terminal_pb2.CloseTerminalRequest(terminal_id=terminal.id))


def test_a_dropped_terminal_connection_resumes_from_the_last_offset(host: HostProcess) -> None:
    """The page's Attach connection is cut and output is written while it cannot reconnect; back
    online, the page resumes from the last offset it showed: every line once, none missing."""
    terminal = bash_terminal(host)
    # All of them, with the lines before, within what the page keeps (1000 lines of scrollback
    # and the screen), so the whole gap can be read back from xterm.js's buffer.
    lines = 900
    try:
        shown = drive("reconnect", base=host.http_address, id=terminal.id, lines=lines)
        # Nothing of it reached the page while it was cut off ...
        assert "gap-1" not in shown["offlineText"].split()
        assert shown["connections"] >= 2
        # ... and then all of it, once, in order: the host replayed from the page's offset.
        assert "resumed" in shown["status"]
        text = [line.rstrip() for line in shown["text"].splitlines()]
        assert [line for line in text if line.startswith("gap-")] == [
            f"gap-{n}" for n in range(1, lines + 1)
        ]
        assert text.count("before-4") == 1
        assert text.count("written-2") == 1
    finally:
        host.terminals.CloseTerminal(terminal_pb2.CloseTerminalRequest(terminal_id=terminal.id))


def test_a_flood_reaches_the_terminal_page_whole_and_in_order(host: HostProcess) -> None:
    """`seq` floods a terminal the page shows (through the bridge): xterm.js is given every
    byte, and its buffer ends with the last lines in order and keeps 1000 lines of scrollback
    above the screen. The flood (1.5 MB) is under attach_lag (2 MiB), so the host
    never skips output for a slow page."""
    last = 200_000
    made = host.terminals.CreateTerminal(
        terminal_pb2.CreateTerminalRequest(
            command_line=f"read go; seq 1 {last}", cwd="/tmp", rows=24, cols=90
        ),
        timeout=30,
    ).terminal
    try:
        shown = drive("flood_whole", base=host.http_address, terminal=made.id)
    finally:
        host.terminals.CloseTerminal(terminal_pb2.CloseTerminalRequest(terminal_id=made.id))
    echo = 2  # the Enter that starts it, echoed as \r\n
    assert shown["bytes"] == echo + sum(len(str(n)) + 2 for n in range(1, last + 1))
    lines = [line.strip() for line in shown["text"].splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    assert len(lines) == shown["scrollback"] + shown["rows"] - 1  # one row left for the cursor
    assert shown["scrollback"] == 1000
    assert lines == [str(n) for n in range(last - len(lines) + 1, last + 1)]


def test_one_turn_with_the_concierge_through_converse(host: HostProcess) -> None:
    shown = drive(
        "session",
        base=host.http_address,
        capability="concierge",
        message="What is in examples/agents/scout?",
        context_key="findings",
    )
    files = [
        p
        for p in (ROOT / "examples/agents/scout").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    said = shown["said"]
    assert said[0] == ["you", "What is in examples/agents/scout?"]
    assert said[-1][0] == "concierge"
    assert said[-1][1].startswith(f"examples/agents/scout holds {len(files)} files")
    # The session's context, as the concierge wrote it, shown live beside the chat.
    assert shown["context"]["findings"]["examples/agents/scout"]["files"] == len(files)


def test_the_audit_page_shows_an_egress_refusal_as_it_happens(host: HostProcess) -> None:
    agent = deploy(host, AGENTS / "toolbox", name="console-fetcher")  # no egress policy

    def fetch() -> None:
        output = execute(host, agent, "get", {"url": "http://127.0.0.1:9/console"})
        assert output.error.code == "host_not_allowed"

    shown = drive("audit", base=host.http_address, agent=agent, when_ready=fetch)
    assert shown["before"] == 0
    [row] = shown["rows"]
    _time, who, decision, request, reason, rule = row
    assert (who, decision, request, reason) == (
        agent,
        "DENIED",
        "GET http://127.0.0.1:9/console",
        "host_not_allowed",
    )
    assert "deny by default" in rule


def test_the_bridge_refuses_websockets_from_other_origins(host: HostProcess) -> None:
    """A page of another site must not type into a terminal of a host without auth: the bridge
    takes WebSockets whose Origin is the host the page came from."""
    other = host.http_address.replace("127.0.0.1", "localhost")
    shown = drive("origin", base=host.http_address, other_base=other)
    assert shown == {
        "ok": True,
        "screenshots": [],
        "crossOrigin": "refused",
        "sameOrigin": "open",
        "crossOriginCall": "refused: TypeError",  # and no call to /rpc either
    }


@pytest.fixture(scope="module")
def auth_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    folder = tmp_path_factory.mktemp("console-auth")
    tokens = folder / "tokens"
    tokens.write_text(
        f"admin {TOKEN}\nreader {READER} agent.read\n"
        f"watcher {WATCHER} agent.read,terminal.read,terminal.attach\n"
    )
    tokens.chmod(0o600)
    process = HostProcess(folder / "state", "--auth-tokens-file", str(tokens), http=True)
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


def test_sign_in_with_a_token_and_a_refusal_without(auth_host: HostProcess) -> None:
    shown = drive(
        "signin", base=auth_host.http_address, token=TOKEN, wrong_token="not-a-token-at-all"
    )
    assert shown["refusal"] == (
        "invalid bearer token: it matches no token in the host's token file (unauthenticated)"
    )
    assert shown["status"] == "No agents on this host."
    # Kept for the tab only: in sessionStorage, not localStorage, and a new tab asks again.
    assert shown["stored"] == {"session": TOKEN, "local": 0}
    assert shown["otherTab"].startswith("#/sign-in")


def test_console_calls_are_checked_by_the_rpcs_own_rights(auth_host: HostProcess) -> None:
    """The Connect endpoint is the gRPC port's handlers: no token is UNAUTHENTICATED, a token
    without the right is PERMISSION_DENIED naming it, with the same message as over gRPC."""
    url = f"{auth_host.http_address}/rpc/ether.v1.AgentIOService/ListAgents"
    body = agent_io_pb2.ListAgentsRequest().SerializeToString()
    proto = {"content-type": "application/proto"}
    refused = httpx.post(url, content=body, headers=proto, timeout=30)
    assert refused.status_code == 401
    assert refused.json()["code"] == "unauthenticated"
    assert "missing bearer token" in refused.json()["message"]
    listed = httpx.post(
        url, content=body, headers=proto | {"authorization": f"Bearer {READER}"}, timeout=30
    )
    assert listed.status_code == 200
    assert agent_io_pb2.ListAgentsResponse.FromString(listed.content).agents == []
    create = httpx.post(
        f"{auth_host.http_address}/rpc/ether.v1.TerminalService/CreateTerminal",
        content=terminal_pb2.CreateTerminalRequest(command_line="bash").SerializeToString(),
        headers=proto | {"authorization": f"Bearer {READER}"},
        timeout=30,
    )
    assert create.status_code == 403
    assert create.json()["code"] == "permission_denied"
    assert create.json()["message"] == "reader lacks the terminal.create right"


def test_a_caller_without_the_write_right_is_attached_read_only(auth_host: HostProcess) -> None:
    admin = (("authorization", f"Bearer {TOKEN}"),)
    made = auth_host.terminals.CreateTerminal(
        terminal_pb2.CreateTerminalRequest(
            command_line="bash --norc --noprofile", owner="watcher", rows=24, cols=80
        ),
        metadata=admin,
        timeout=30,
    ).terminal

    def write(line: str) -> None:
        auth_host.terminals.WriteInput(
            terminal_pb2.WriteInputRequest(
                terminal_id=made.id, input=terminal_pb2.TerminalInput(text=f"echo {line}\n")
            ),
            metadata=admin,
            timeout=30,
        )

    write("shared-line")
    try:
        shown = drive(
            "readonly_by_right",
            base=auth_host.http_address,
            token=WATCHER,
            terminal=made.id,
            line="shared-line",
            after="after-watcher",
            when_ready=lambda: write("after-watcher"),
        )
        assert shown["readOnly"] == "true"
        assert shown["status"].startswith("Attached read-only")
        lines = auth_host.terminals.ReadScreen(
            terminal_pb2.ReadScreenRequest(terminal_id=made.id), metadata=admin, timeout=30
        ).screen.lines
        assert "after-watcher" in [line.rstrip() for line in lines]
        assert not any("typed-without-the-right" in line for line in lines)
    finally:
        auth_host.terminals.CloseTerminal(
            terminal_pb2.CloseTerminalRequest(terminal_id=made.id), metadata=admin, timeout=30
        )


def test_the_bridge_without_a_token_ends_with_the_hosts_status(auth_host: HostProcess) -> None:
    shown = drive("bridge_refusal", base=auth_host.http_address)
    [status] = shown["seen"]
    error = json.loads(status)["error"]
    assert error["code"] == "unauthenticated"
    assert error["message"].startswith("missing bearer token")
    assert error["details"][0]["type"] == "google.rpc.ErrorInfo"
    assert shown["code"] == 1000  # a normal close, after the status
