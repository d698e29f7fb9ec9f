"""A CreateTerminal whose caller goes while the terminal starts (docs/terminals.md, "Lifecycle",
calls that overlap).

Before: grpc.aio cancels a call whose client cancelled it, or whose deadline passed, with its
handler task's own `cancel()`, and the create stopped where it was: its program ran on and
the terminal was listed, but it never had its `created` event (nor, later, its `exited` one);
stopped before its program led its session (a millisecond or two, too short for a test to
hold), it also left its request_id unremembered, so a retry with it made a second terminal.
Now the create runs to its end in the terminal manager's task group.

The create is held mid-start by a write transaction the test keeps open on the host's terminal
records: the create's own record waits for it (the host's busy timeout, 5 s), its program
already started. The program tells the test it runs through a FIFO, the host's log that the
call has ended; the tests wait on those, never on time.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import grpc
import pytest

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.support.procs import wait_gone
from tests.terminals.support import close, create, processes_of, read_fifo, records_held


@pytest.mark.parametrize("goes", ["cancels", "deadline"])
def test_a_create_whose_caller_goes_while_it_starts_makes_its_terminal(
    host: HostProcess, tmp_path: Path, goes: str
) -> None:
    """A CreateTerminal (with a request_id) whose client cancels it, or whose deadline
    passes, once its program runs but before its answer: the terminal is made all the same --
    it runs, is listed, has its `created` event (before its `closed` one) -- and a retry with
    the same request_id answers with that terminal, not a second one."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    probe = create(host, ["sleep", "600"])
    watch = host.terminals.WatchTerminals(
        pb.WatchTerminalsRequest(include_existing=True), timeout=60
    )
    terminal_id = ""
    try:
        next(e for e in watch if e.terminal.id == probe.id)  # the watch is live
        request = pb.CreateTerminalRequest(
            argv=pb.Argv(args=["sh", "-c", f'echo "$ETHER_TERMINAL_ID" > {fifo}; exec sleep 600']),
            cwd="/tmp",
            request_id=str(uuid.uuid4()),
        )
        mark = len(host.records)
        with records_held(host):
            creating = host.terminals.CreateTerminal.future(
                request, timeout=60 if goes == "cancels" else 2
            )
            terminal_id = read_fifo(fifo)  # its program runs; its record waits
            if goes == "cancels":
                assert creating.cancel(), "the create answered while its record was held"
            else:
                with pytest.raises(grpc.RpcError) as gave_up:
                    creating.result()
                assert gave_up.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, gave_up.value
            # The host has ended the call (cancelled its handler) before its record may go on.
            host.wait_for_log(
                lambda r: (
                    r.get("event") == "rpc"
                    and str(r.get("method")).endswith("/CreateTerminal")
                    and r.get("code") != "OK"
                ),
                after=mark,
            )
        retried = host.terminals.CreateTerminal(request, timeout=30).terminal
        assert retried.id == terminal_id, "the retry made a second terminal"
        listed = host.terminals.ListTerminals(pb.ListTerminalsRequest(), timeout=30).terminals
        assert [t.state for t in listed if t.id == terminal_id] == [pb.TERMINAL_STATE_RUNNING]
        pids = list(processes_of(terminal_id, pumps=False))
        assert pids, "the terminal's program is not running"
        close(host, terminal_id, grace=0)
        events = []
        for event in watch:
            if event.terminal.id == terminal_id:
                events.append(event.WhichOneof("event"))
                if events[-1] == "closed":
                    break
        # (`exited` between them: the close ends its program first.)
        assert events[0] == "created" and events.count("created") == 1, events
        assert wait_gone(pids, within=30) == []
    finally:
        watch.cancel()
        for leftover in {probe.id, terminal_id} & {
            t.id
            for t in host.terminals.ListTerminals(pb.ListTerminalsRequest(), timeout=30).terminals
        }:
            close(host, leftover, grace=0)
