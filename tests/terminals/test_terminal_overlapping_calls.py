"""Calls on terminals that overlap, as several clients make them (docs/terminals.md, "Lifecycle"
and "Configuration").

Before: two CreateTerminal calls with one request_id at once both started a terminal (the id
was remembered only once the first had started its program); with a sandbox (clients' with
`[terminals] sandbox = true`, and every agent's), creates at once all passed the terminal
limits (the sandbox is made in a worker thread, between the check and the count), and one
whose sandbox was being made when the host's stop began closing terminals started its program
after that, never to be closed (no `closed` event; its record, still `running`, made it "lost"
after a restart); a CloseTerminal whose caller went during the grace (its deadline passed, or
it cancelled) was cut off half-way: the close's SIGKILL never came (the program, which had
ignored the SIGHUP, died only as its control group was removed, or by the orphan sweeper), and
the terminal stayed listed as exited, counting against the limits, with no `closed` event.

Overlaps are made with futures started together; the tests wait on answers and events, never
on time.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import terminal_pb2 as pb
from ether.v1 import terminal_pb2_grpc
from tests.support.host import HostProcess
from tests.terminals.conftest import start_host
from tests.terminals.support import (
    SHELL,
    SHELL_ENV,
    alive,
    close,
    create,
    error_details,
    processes_of,
    seconds,
    wait_output,
)

ROUNDS = 10  # each round overlaps its calls anew: an overlap the host mishandles shows in most

# A program that ignores SIGHUP (saying so) and never reads its terminal: a close ends it only
# with the SIGKILL after the grace. (os.write: a print in the handler fails, "reentrant call",
# when the signal lands while the program is still in a print of its own.)
STUBBORN = (
    "import os, signal, time\n"
    "signal.signal(signal.SIGHUP, lambda *_: os.write(1, b'got-' b'hup\\r\\n'))\n"
    "os.write(1, b'rea' b'dy\\r\\n')\n"
    "while True: time.sleep(60)\n"
)


def _creates_at_once(host: HostProcess, requests: list[pb.CreateTerminalRequest]) -> list[object]:
    """Send every request before reading any answer; the answers (Terminal) or errors, in order."""
    futures = [host.terminals.CreateTerminal.future(r, timeout=60) for r in requests]
    results: list[object] = []
    for future in futures:
        try:
            results.append(future.result().terminal)
        except grpc.RpcError as error:
            results.append(error)
    return results


def _listed(host: HostProcess) -> list[pb.Terminal]:
    return list(host.terminals.ListTerminals(pb.ListTerminalsRequest(), timeout=30).terminals)


def _close_all(host: HostProcess, terminal_ids: set[str]) -> None:
    for terminal_id in terminal_ids:
        close(host, terminal_id, grace=0)


def test_creates_repeating_one_request_id_at_once_start_one_terminal(host: HostProcess) -> None:
    """Eight CreateTerminal calls with the same request_id, all sent before any answer (a
    client retrying a call it thinks lost, several clients sharing a key): every one answers
    with the same terminal, and one terminal runs."""
    for _ in range(ROUNDS):
        key = str(uuid.uuid4())
        request = pb.CreateTerminalRequest(
            argv=pb.Argv(args=SHELL), env=SHELL_ENV, cwd="/tmp", request_id=key
        )
        answers = _creates_at_once(host, [request] * 8)
        ids = {a.id for a in answers if isinstance(a, pb.Terminal)}
        try:
            assert all(isinstance(a, pb.Terminal) for a in answers), answers
            assert len(ids) == 1, f"one request_id started {len(ids)} terminals: {ids}"
        finally:
            _close_all(host, ids)


@pytest.fixture
def sandboxed_host(tmp_path: Path) -> Iterator[HostProcess]:
    """A host whose clients' terminals run in a sandbox, at most one per owner."""
    config = (
        "[terminals]\nmax_terminals_per_owner = 1\nmax_terminals = 40\nclose_grace = 1.0\n"
        "sandbox = true\n"
    )
    process = start_host(tmp_path / "state", config)
    try:
        yield process
    finally:
        process.stop()


def test_creates_at_once_do_not_pass_the_owner_limit(sandboxed_host: HostProcess) -> None:
    """Twenty CreateTerminal calls of one owner at once, its limit one terminal, each terminal
    in a sandbox: one is created, the others are RESOURCE_EXHAUSTED (TERMINAL_OWNER_LIMIT), and
    the owner has one terminal."""
    host = sandboxed_host
    request = pb.CreateTerminalRequest(argv=pb.Argv(args=["sleep", "600"]))
    for _ in range(ROUNDS):
        answers = _creates_at_once(host, [request] * 20)
        ids = {a.id for a in answers if isinstance(a, pb.Terminal)}
        try:
            refused = [a for a in answers if not isinstance(a, pb.Terminal)]
            for error in refused:
                assert isinstance(error, grpc.RpcError), error
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
                assert error_details(error)["ErrorInfo"].reason == "TERMINAL_OWNER_LIMIT"
            listed = _listed(host)
            assert len(ids) == 1 and len(listed) == 1, (ids, listed)
        finally:
            _close_all(host, ids)


def test_a_close_whose_caller_goes_during_the_grace_still_ends_the_terminal(
    host: HostProcess,
) -> None:
    """A CloseTerminal whose client cancels it while the program (which ignores SIGHUP) has
    its grace, with other clients' calls in flight: the close goes on without its caller --
    the program gets its SIGKILL when the grace ends, the terminal is closed (a `closed`
    event, reason `closed`; GetTerminal NOT_FOUND) and none of its processes is left -- and
    the calls in flight end with it: an Attach stream with `exit`, a WaitFor for the exit with
    the exit status, a WaitFor for the screen FAILED_PRECONDITION (PROGRAM_EXITED)."""
    terminal = create(host, ["python3", "-c", STUBBORN])
    wait_output(host, terminal.id, "ready", after=0)
    pids = list(processes_of(terminal.id))
    watch = host.terminals.WatchTerminals(
        pb.WatchTerminalsRequest(include_existing=True), timeout=60
    )
    start = pb.AttachRequest(start=pb.AttachStart(terminal_id=terminal.id))
    attach = host.terminals.Attach(iter([start]), timeout=60)
    try:
        # The watch and the attach are live once they show the terminal.
        next(e for e in watch if e.terminal.id == terminal.id)
        assert [next(attach).WhichOneof("kind") for _ in range(2)] == ["started", "snapshot"]
        waits = [
            host.terminals.WaitFor.future(
                pb.WaitForRequest(terminal_id=terminal.id, timeout=seconds(50), **condition),
                timeout=60,
            )
            for condition in (
                {"exit": pb.ExitCondition()},
                {"screen": pb.ScreenCondition(regex="never-shown")},
            )
        ]
        request = pb.CloseTerminalRequest(terminal_id=terminal.id, grace=seconds(5))
        closing = host.terminals.CloseTerminal.future(request, timeout=60)
        wait_output(host, terminal.id, "got-hup", after=0)  # the close is under way
        closing.cancel()  # the caller goes, well before the grace ends
        closed = next(
            e for e in watch if e.terminal.id == terminal.id and e.WhichOneof("event") == "closed"
        )
        attached = list(attach)  # to the end of the stream
    finally:
        watch.cancel()
        attach.cancel()
        _close_all(host, {t.id for t in _listed(host) if t.id == terminal.id})
    assert closed.closed.reason == "closed"
    assert closed.terminal.exit_status.signal_name == "SIGKILL", closed.terminal.exit_status
    with pytest.raises(grpc.RpcError) as gone:
        host.terminals.GetTerminal(pb.GetTerminalRequest(terminal_id=terminal.id), timeout=30)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    assert alive(pids) == []
    assert attached[-1].exit.exit_status.signal_name == "SIGKILL", attached[-1]
    assert waits[0].result().exit_status.signal_name == "SIGKILL"
    with pytest.raises(grpc.RpcError) as ended:
        waits[1].result()
    assert ended.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_details(ended.value)["ErrorInfo"].reason == "PROGRAM_EXITED"


def test_creates_under_way_when_the_host_stops_are_refused_or_closed(tmp_path: Path) -> None:
    """Clients that keep creating sandboxed terminals while the host stops (SIGTERM): every
    CreateTerminal the host answered with a terminal is followed by that terminal's `closed`
    event, reason `shutdown` (a create whose sandbox was being made when the closing began
    would otherwise start its program after it, never to be closed or recorded as closed);
    the calls after it are refused. The host exits 0."""
    config = (
        "[terminals]\nmax_terminals_per_owner = 200\nmax_terminals = 200\nclose_grace = 1.0\n"
        "sandbox = true\n"
    )
    host = start_host(tmp_path / "state", config)
    channel = grpc.insecure_channel(host.address)  # host.stop() closes the host's own channel
    terminals = terminal_pb2_grpc.TerminalServiceStub(channel)
    request = pb.CreateTerminalRequest(argv=pb.Argv(args=["sleep", "600"]))
    created: list[str] = []
    refusals: list[grpc.RpcError] = []
    enough = threading.Event()  # 20 created: the stop comes while creates keep coming

    def keep_creating() -> None:
        while True:
            try:
                created.append(terminals.CreateTerminal(request, timeout=60).terminal.id)
            except grpc.RpcError as error:
                refusals.append(error)
                return
            if len(created) >= 20:
                enough.set()

    clients = [threading.Thread(target=keep_creating) for _ in range(16)]
    try:
        watch = terminals.WatchTerminals(pb.WatchTerminalsRequest(), timeout=120)
        first = terminals.CreateTerminal(request, timeout=60).terminal.id
        next(e for e in watch if e.terminal.id == first)  # the watch is live
        created.append(first)
        for client in clients:
            client.start()
        assert enough.wait(120), (created, refusals)
    finally:
        code = host.stop(60)
    for client in clients:
        if client.ident is not None:  # started
            client.join(60)
    reasons = {e.terminal.id: e.closed.reason for e in watch if e.WhichOneof("event") == "closed"}
    channel.close()
    assert code == 0
    # Refused by the closing host (UNAVAILABLE), or, coming after, by its stopping gRPC server
    # (UNAVAILABLE or CANCELLED, without reaching the service).
    codes = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
    assert len(refusals) == len(clients) and {e.code() for e in refusals} <= codes, [
        (e.code(), e.details()) for e in refusals
    ]
    unclosed = [i for i in created if reasons.get(i) != "shutdown"]
    assert unclosed == [], (
        f"{len(unclosed)} of {len(created)} terminals were not closed: {unclosed}"
    )
