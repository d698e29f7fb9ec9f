"""More claims of docs/terminals.md that no other test asserted, checked as a user sees them: a
real host, real programs on its terminals, a real SDK agent making `term.*` calls, gRPC stubs.

- Configuration, `idle_timeout`: "closed after this long without input or output" -- input
  alone keeps a terminal open.
- Quick start, the interrupt rule: the interrupt character "what `stty` set" jumps the input
  queue, and Ctrl-C is then a plain byte.
- Reading the screen and waiting: `output` text normalisation (escapes and control characters
  but TAB and LF removed, `\\r\\n` as `\\n`, invalid UTF-8 as U+FFFD, `$` at the end of the
  output so far); the cursor's line keeping the spaces before the cursor; `include_scrollback`
  for a screen condition; `keep_trailing_spaces`; RE2's ASCII-only `\\d`/`\\w`, `(?s)`, named
  groups and `\\pL`.
- Recording: the header's title, UTF-8 decoded across reads, invalid bytes as U+FFFD; a
  recording started again after a stop discards the earlier one; the host's start deletes the
  casts of an earlier run.
- Ownership, the environment: allowlist, then `[terminals] env`, then the request's `env`, then
  `TERM` from `term`; `LINES` and `COLUMNS` are not set.
- Agents: `term.run`'s new terminal gets `TERM=dumb`, `PAGER=cat`, `NO_COLOR=1`; a `term.wait`
  that times out is an answer (`matched: false, reason: "timeout"`), not an error; an agent's
  terminals are closed `owner_gone` when it goes FATAL or exits for good.
- After a host restart: `term.get` and `term.read` answer for an agent's terminals of an
  earlier run, and its other calls are refused saying the terminal ended before the restart;
  only the newest 1,000 are answered for; a former screen honours `keep_trailing_spaces`.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, supervisor_pb2
from ether.v1 import terminal_pb2 as pb
from tests.support.agents import agent_pids, deploy, remove_agent, watch_until
from tests.support.calls import data, execute
from tests.support.host import HostProcess
from tests.terminals.conftest import CONFIG, start_host
from tests.terminals.support import (
    close,
    create,
    error_details,
    screen,
    seconds,
    wait,
    wait_exit,
    wait_output,
    wait_quiet,
    wait_screen,
    write,
)
from tests.terminals.test_attach import Client
from tests.terminals.test_leaks import closed_event
from tests.terminals.test_recording import download, output_of, parse, set_recording

CALLER = '''
"""Makes one term.* host call per task and returns its result (or its error)."""
from typing import Any

from ether_agent import Agent, TaskContext
from ether_agent.terminal import TERMINAL_CALLS

agent = Agent("caller", version="1.0.0", description="term.* calls", calls=list(TERMINAL_CALLS))


@agent.action(description="One host call.")
async def call(method: str, params: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    return {"result": await ctx.host_call(method, params)}


if __name__ == "__main__":
    agent.run()
'''


@pytest.fixture(scope="module")
def caller_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SDK agent whose one action makes the term.* call it is given."""
    folder = tmp_path_factory.mktemp("caller")
    (folder / "agent.py").write_text(CALLER)
    (folder / "agent.toml").write_text(
        'name = "caller"\nlanguage = "python"\ncalls = ["term.*"]\nstop_grace = 1\n'
    )
    return folder


def host_call(host: HostProcess, agent: str, method: str, **params: Any) -> Any:
    """The result of ``method`` called by ``agent``; an error reply raises AssertionError."""
    output = execute(host, agent, "call", {"method": method, "params": params}, timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    return data(output)["result"]


def get(host: HostProcess, terminal_id: str) -> pb.Terminal:
    request = pb.GetTerminalRequest(terminal_id=terminal_id)
    return host.terminals.GetTerminal(request, timeout=30).terminal


def test_input_alone_keeps_a_terminal_from_its_idle_timeout(host: HostProcess) -> None:
    """`idle_timeout`: "closed after this long without input or output". A program that prints
    nothing is typed at after every 0.5 s of silence for 6 s with an idle timeout of 3 s: it
    is still running, its output did not move, and once the typing stops it is closed
    `idle_timeout`. (The silences are WaitFor quiet answers, not sleeps.)"""
    terminal = create(
        host, command="stty -echo; echo ready; exec cat >/dev/null", idle_timeout=seconds(3)
    )
    wait_output(host, terminal.id, "ready", after=0)
    before = get(host, terminal.id).output_offset
    for n in range(12):
        wait_quiet(host, terminal.id, 0.5)  # a terminal closed meanwhile fails this wait
        write(host, terminal.id, f"key {n}\r")
    after = get(host, terminal.id)
    assert after.state == pb.TERMINAL_STATE_RUNNING and after.output_offset == before
    assert closed_event(host, terminal.id).closed.reason == "idle_timeout"


def test_the_interrupt_character_stty_set_jumps_the_queue(host: HostProcess) -> None:
    """ "input holding the terminal's interrupt ... character (Ctrl-C, ..., or what `stty` set
    them to) ... drops the queued input": after `stty intr ^X`, a Ctrl-C behind a megabyte of
    unread input queues like any byte (nothing discarded), and a Ctrl-X drops the queue and
    interrupts the program."""
    slow_reader = "import os, time\nwhile os.read(0, 64): time.sleep(0.01)"
    terminal = create(
        host,
        command=f"stty -icanon -echo intr ^X; echo ready; exec python3 -c '{slow_reader}'",
    )
    wait_output(host, terminal.id, "ready", after=0)
    pasted = write(host, terminal.id, data=b"x" * (1024 * 1024))
    assert pasted.bytes_pending > 0
    plain = write(host, terminal.id, ctrl="c")
    assert plain.bytes_discarded == 0 and plain.bytes_pending > 1
    interrupt = write(host, terminal.id, ctrl="x")
    assert interrupt.bytes_discarded > 0 and interrupt.bytes_pending <= 1
    assert wait_exit(host, terminal.id).exit_status.signal_name == "SIGINT"
    close(host, terminal.id)


def test_output_waits_match_normalised_text(host: HostProcess) -> None:
    """`output`: "escape sequences and control characters but TAB and LF are removed (`\\r\\n`
    reads as `\\n`), invalid UTF-8 shows as U+FFFD; `raw` matches the bytes as written", and
    "`$` also matches at the end of the output received so far" (a prompt with no newline)."""
    terminal = create(
        host,
        command=r"printf '\033[1;31mred\033[0m\tx\a\ny\377z\nname? '; exec sleep 600",
    )
    found = wait_output(host, terminal.id, r"red\tx\ny\x{FFFD}z\nname\? $", after=0)
    assert found.match == "red\tx\ny\ufffdz\nname? "
    assert found.match_start_offset == len("\033[1;31m")  # offsets count the bytes written
    assert found.match_end_offset == get(host, terminal.id).output_offset
    raw = pb.OutputCondition(regex=r"\x1b\[1;31mred\x1b\[0m\tx\x07\r\n", after_offset=0, raw=True)
    assert wait(host, terminal.id, output=raw).match_start_offset == 0
    close(host, terminal.id)


def test_screen_waits_see_the_spaces_before_the_cursor_and_the_scrollback(
    host: HostProcess,
) -> None:
    """`screen`: "lines as ReadScreen returns them, except that the cursor's line keeps the
    spaces before the cursor"; ReadScreen removes trailing spaces and `keep_trailing_spaces`
    keeps them (every cell); with `include_scrollback` a line that scrolled off matches."""
    terminal = create(
        host,
        command=r"echo gone-1; seq 2 12; printf 'pad   \nask:   '; exec sleep 600",
        rows=5,
        cols=20,
    )
    found = wait_screen(host, terminal.id, r"^pad\nask:   $")
    assert found.screen.lines[-1] == "ask:" and (found.screen.cursor.col == 7)
    kept = screen(host, terminal.id, keep_trailing_spaces=True).lines
    assert kept[-2] == "pad" + " " * 17 and kept[-1] == "ask:" + " " * 16
    assert screen(host, terminal.id).lines[-2] == "pad"
    with pytest.raises(grpc.RpcError) as error:
        wait_screen(host, terminal.id, "^gone-1$", timeout=0.5)  # not on the visible lines
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    condition = pb.ScreenCondition(regex="^gone-1$", include_scrollback=True)
    assert wait(host, terminal.id, screen=condition).match == "gone-1"
    close(host, terminal.id)


def test_re2_classes_are_ascii_and_its_flags_and_groups_work(host: HostProcess) -> None:
    """ "`\\d`, `\\w`, `\\s` and `\\b` are ASCII-only; `(?i)`, `(?s)`, named groups
    `(?P<name>...)` and classes such as `\\pL` work": an Arabic-Indic digit is no `\\d`, an
    accented letter no `\\w` but a `\\pL`; `(?s)` lets `.` cross a line; a named group comes
    back in `groups`."""
    terminal = create(
        host, command="printf 'n=\\331\\243 m=7 \\303\\251t\\nfoo\\nbar\\n'; exec sleep 600"
    )
    wait_output(host, terminal.id, "bar", after=0)
    assert list(wait_output(host, terminal.id, r"=(\d)", after=0).groups) == ["7"]
    assert wait_output(host, terminal.id, r"\w+\n", after=0).match == "t\n"
    assert wait_output(host, terminal.id, r"\pL+\n", after=0).match == "\u00e9t\n"
    named = wait_output(host, terminal.id, r"(?s)(?P<first>fo+).bar", after=0)
    assert named.match == "foo\nbar" and list(named.groups) == ["foo"]
    with pytest.raises(grpc.RpcError) as error:
        wait_output(host, terminal.id, r"foo.bar", after=0, timeout=0.5)  # `.` stops at \n
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    close(host, terminal.id)


def test_a_cast_has_the_terminals_name_and_whole_characters(host: HostProcess) -> None:
    """Recording: the header's title is "the terminal's name"; "Output is decoded as UTF-8
    across reads (a character split between two reads is written whole); bytes that are not
    UTF-8 become U+FFFD". The program writes the first byte of an `é`, and only once an
    attached client has received that byte (so the host has read it) the second one."""
    terminal = create(
        host,
        command=r"stty -echo; printf 'A\303'; read go; printf '\251B \377C\n'; exec sleep 600",
        name="cast-name",
        record=True,
    )
    viewer = Client(host, pb.AttachStart(terminal_id=terminal.id, from_offset=0, read_only=True))
    seen = b""
    while not seen.endswith(b"A\xc3"):
        message = viewer.next()
        seen += message.output.data if message.WhichOneof("kind") == "output" else b""
    viewer.done()
    write(host, terminal.id, "go\r")
    wait_output(host, terminal.id, "C$", after=0)
    header, events = parse(download(host, terminal.id)[0])
    assert header["title"] == "cast-name"
    assert "A\u00e9B \ufffdC\r\n" in output_of(events)
    close(host, terminal.id)


def test_recording_again_after_a_stop_starts_a_new_cast(host: HostProcess) -> None:
    """SetRecording "starts a recording later (...; an earlier recording of the terminal is
    discarded)": once stopped, a second SetRecording(record) starts a new, active cast that
    holds what came after it and nothing of the first."""
    terminal = create(host, command="stty -echo; while read word; do echo got-$word; done")
    set_recording(host, terminal.id, True)
    write(host, terminal.id, "first\r")
    wait_output(host, terminal.id, "got-first", after=0)
    assert not set_recording(host, terminal.id, False).active
    again = set_recording(host, terminal.id, True)
    assert again.active and not again.stopped_reason
    write(host, terminal.id, "second\r")
    wait_output(host, terminal.id, "got-second", after=0)
    cast, recording = download(host, terminal.id)
    text = output_of(parse(cast)[1])
    assert "got-second" in text and "got-first" not in text and recording.active
    close(host, terminal.id)


def test_a_new_host_deletes_the_casts_of_the_earlier_run(tmp_path: Path) -> None:
    """ "closing deletes it, and so does the host's start (recordings of an earlier run's
    terminals are not kept)": a cast left behind by a host killed with `kill -9` is gone once
    the next host on the same state directory serves."""
    state = tmp_path / "state"
    first = start_host(state)
    terminal = create(first, command="echo recorded; exec sleep 600", record=True)
    wait_output(first, terminal.id, "recorded", after=0)
    cast = state / "terminals" / "recordings" / f"{terminal.id}.cast"
    assert b"recorded" in cast.read_bytes()
    first.process.kill()
    first.process.wait()
    assert cast.exists()  # nothing closed it
    second = start_host(state)
    try:
        assert not cast.exists()
    finally:
        second.stop()


ENV_CONFIG = CONFIG + (
    'env_allowlist = ["PATH", "ETHER_DOC_PASSED"]\n'
    'env = {SITE = "from-config", SHARED = "from-config"}\n'
)


def test_the_environment_is_built_in_the_documented_order(tmp_path: Path) -> None:
    """ "the host's variables named in `env_allowlist`, then `[terminals] env`, then the
    request's `env`, then `TERM` (from the request's `term`...). `LINES` and `COLUMNS` are not
    set". A host variable off the allowlist (HOME here, and another) is not passed on."""
    path = tmp_path / "state.toml"
    path.write_text(ENV_CONFIG)
    extra = {"ETHER_DOC_PASSED": "passed", "ETHER_DOC_HIDDEN": "hidden", "LINES": "7"}
    host = HostProcess(tmp_path / "state", "--config", str(path), env=extra)
    try:
        host.wait_serving()
        shown = "[$ETHER_DOC_PASSED][$ETHER_DOC_HIDDEN][$SITE][$SHARED][$TERM]"
        unset = "[${LINES-unset}][${COLUMNS-unset}][${HOME-unset}]"
        terminal = create(
            host, command=f'echo "{shown}{unset}"', env={"SHARED": "request"}, term="vt100"
        )
        line = wait_exit(host, terminal.id).screen.lines[0]
        assert line == "[passed][][from-config][request][vt100][unset][unset][unset]"
        close(host, terminal.id)
    finally:
        host.stop()


@pytest.fixture(scope="module")
def caller(host: HostProcess, caller_folder: Path) -> Iterator[str]:
    name = deploy(host, caller_folder, name="caller")
    yield name
    remove_agent(host, name)


def test_term_run_gives_its_new_terminal_a_plain_environment(
    host: HostProcess, caller: str
) -> None:
    """`term.run`: "A new terminal gets `TERM=dumb`, `PAGER=cat` and `NO_COLOR=1`"."""
    result = host_call(
        host, caller, "term.run", command='echo "[$TERM][$PAGER][$NO_COLOR]"', timeout=30
    )
    assert result["reason"] == "exit" and result["head"] == "[dumb][cat][1]\n"


def test_a_term_wait_that_times_out_is_an_answer_not_an_error(
    host: HostProcess, caller: str
) -> None:
    """`term.wait`: "a timeout is `matched: false, reason: "timeout"`, not an error", with the
    screen it last saw."""
    made = host_call(host, caller, "term.create", command="echo waiting-here; exec sleep 600")
    terminal_id = made["terminal_id"]
    shown = host_call(host, caller, "term.wait", terminal_id=terminal_id, screen="waiting-here")
    assert shown["matched"] and shown["reason"] == "matched"
    missed = host_call(
        host, caller, "term.wait", terminal_id=terminal_id, screen="never shown", timeout=0.3
    )
    assert not missed["matched"] and missed["reason"] == "timeout"
    assert missed["screen"]["lines"][0] == "waiting-here" and missed["waited"] >= 0.3
    host_call(host, caller, "term.close", terminal_id=terminal_id)


def kill_agent(host: HostProcess, agent: str) -> None:
    (pid,) = agent_pids(host, agent)
    assert pid > 0
    os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("ending", "spec"),
    [
        (
            "FATAL",
            {
                "start_retries": 0,
                "max_restarts": 0,
                "stable_after": duration_pb2.Duration(seconds=3600),
            },
        ),
        ("EXITED", {"restart": supervisor_pb2.RESTART_POLICY_NEVER}),
    ],
)
def test_an_agents_terminals_close_when_it_goes_fatal_or_exits_for_good(
    host: HostProcess, caller_folder: Path, ending: str, spec: dict[str, Any]
) -> None:
    """ "closed when the agent stops (reason `owner_gone`)" and, in Lifecycle, "`owner_gone`
    (its agent stopped, exited for good or went FATAL)": the agent's process is killed with
    no restart left, the agent ends `ending`, and its running terminal is closed
    `owner_gone`."""
    name = deploy(host, caller_folder, name=f"caller-{ending.lower()}", **spec)
    try:
        made = host_call(host, name, "term.create", argv=["sleep", "600"])
        watch = host.terminals.WatchTerminals(
            pb.WatchTerminalsRequest(owner=f"agent:{name}"), timeout=60
        )
        kill_agent(host, name)
        watch_until(host, name, {ending})  # a new agent: its first such event is this one
        closed = next(
            e
            for e in watch
            if e.terminal.id == made["terminal_id"] and e.WhichOneof("event") == "closed"
        )
        watch.cancel()
        assert closed.closed.reason == "owner_gone"
        request = agent_io_pb2.GetAgentRequest(name=name)
        state = host.agents.GetAgent(request, timeout=30).agent.state
        assert state == agent_io_pb2.AgentState.Value(f"AGENT_STATE_{ending}")
    finally:
        remove_agent(host, name)


def test_an_agent_reads_its_terminals_of_an_earlier_run(
    tmp_path: Path, caller_folder: Path
) -> None:
    """After a restart, "GetTerminal, ReadScreen (and `term.get`, `term.read`)" show the last
    state and screen of an agent's terminal that had exited; "every other call" is NOT_FOUND
    saying it ended before the restart (the agent sees `not_found`)."""
    state = tmp_path / "state"
    host = start_host(state)
    name = deploy(host, caller_folder, name="caller-restart")
    made = host_call(host, name, "term.create", command="echo agent-before-$((6*7)); exit 3")
    terminal_id = made["terminal_id"]
    assert host_call(host, name, "term.wait", terminal_id=terminal_id, exit=True)["matched"]
    assert host.stop() == 0

    host = start_host(state)
    try:
        watch_until(host, name, {"RUNNING"})  # deployed again from the host's agent store
        info = host_call(host, name, "term.get", terminal_id=terminal_id)
        assert info["state"] == "closed" and info["exit_status"]["code"] == 3
        assert info["pid"] == 0
        shown = host_call(host, name, "term.read", terminal_id=terminal_id)
        assert shown["lines"][0] == "agent-before-42" and shown["exited"]
        assert shown["exit_status"]["code"] == 3
        params = {"terminal_id": terminal_id, "text": "ls\r"}
        output = execute(host, name, "call", {"method": "term.write", "params": params})
        assert output.status == agent_io_pb2.TASK_STATUS_ERROR
        assert output.error.code == "not_found", output.error.message
        assert "before the host restarted" in output.error.message
    finally:
        host.stop()


def test_only_the_newest_1000_former_terminals_are_answered_for(tmp_path: Path) -> None:
    """ "The next host on the same `--state-dir` answers for the terminals of its earlier runs
    (the newest 1,000)": of 1,001 ended terminals, the oldest is forgotten after a restart
    (TERMINAL_NOT_FOUND, like an id never given out) and the next one still shows its screen."""
    state = tmp_path / "state"
    host = start_host(state)
    oldest = create(host, command="echo oldest; exit 3")
    wait_exit(host, oldest.id)
    close(host, oldest.id)
    second = create(host, command="echo second; exit 4")
    wait_exit(host, second.id)
    close(host, second.id)

    def ended(_: int) -> None:
        close(host, create(host, ["true"]).id, grace=0.5)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(ended, range(999)))
    assert host.stop() == 0
    host = start_host(state)
    try:
        assert screen(host, second.id).lines[0] == "second"
        with pytest.raises(grpc.RpcError) as error:
            get(host, oldest.id)
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
        assert error_details(error.value)["ErrorInfo"].reason == "TERMINAL_NOT_FOUND"
    finally:
        host.stop()


def test_a_former_screen_keeps_trailing_spaces_when_asked(tmp_path: Path) -> None:
    """After a restart, ReadScreen of a terminal of the earlier run strips trailing spaces like
    a live one, and `keep_trailing_spaces` keeps them (every cell was recorded)."""
    state = tmp_path / "state"
    host = start_host(state)
    terminal = create(host, command="printf 'edge   \\n'", cols=12)
    wait_exit(host, terminal.id)
    assert host.stop() == 0
    host = start_host(state)
    try:
        assert screen(host, terminal.id).lines[0] == "edge"
        kept = screen(host, terminal.id, keep_trailing_spaces=True).lines[0]
        assert kept == "edge" + " " * 8
        with pytest.raises(grpc.RpcError) as error:
            write(host, terminal.id, "x")
        info = error_details(error.value)["ErrorInfo"]
        assert info.reason == "TERMINAL_ENDED_BEFORE_RESTART"
    finally:
        host.stop()


def test_the_host_logs_each_terminal_it_starts(host: HostProcess) -> None:
    """An operator reading the host's log finds each terminal's start, with the program's pid
    as CreateTerminal answered it (it was written only when the program exited at once or never
    led its session)."""
    mark = len(host.records)
    terminal = create(host, ["sleep", "600"])
    try:
        started = host.wait_for_log(
            lambda r: r.get("event") == "terminal started" and r.get("terminal") == terminal.id,
            after=mark,
        )
        assert started["pid"] == terminal.pid and started["argv"] == ["sleep", "600"]
    finally:
        close(host, terminal.id, grace=0)
