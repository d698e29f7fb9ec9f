"""WatchTerminals with include_existing opened while a terminal starts (docs/terminals.md,
"Lifecycle", calls that overlap).

Before: the listing of existing terminals took every terminal the host held, one still
starting too (its program running, its record not yet written), and sent it as `created`
with its state of that moment; the stream then skipped the terminal's own `created` when its
start ended, so the watcher never saw the terminal as it was created (what CreateTerminal
answered), and was told of it before its record was committed. ListTerminals listed it
meanwhile as well. Now a terminal is listed once its start has ended, and a watcher opened
before that gets its `created` from the start itself.

The create is held mid-start by a write transaction the test keeps open on the host's
terminal records (its program runs; its record waits); the program tells the test its id
through a FIFO. The tests wait on those and on events, never on time.
"""

from __future__ import annotations

import os
from pathlib import Path

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.terminals.support import close, create, read_fifo, records_held


def _listed_ids(host: HostProcess) -> set[str]:
    listed = host.terminals.ListTerminals(pb.ListTerminalsRequest(), timeout=30).terminals
    return {t.id for t in listed}


def test_a_watch_opened_while_a_terminal_starts_sees_it_created_once_as_created(
    host: HostProcess, tmp_path: Path
) -> None:
    """A watch (include_existing) opened while a create is held after its program started:
    its listing leaves that terminal out (ListTerminals too), and the watch gets the
    terminal's `created` once, when the start ends, describing it as the create answered --
    not as it was when the watch opened (the test resizes it in between)."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    probe = create(host, ["sleep", "600"])
    request = pb.CreateTerminalRequest(
        argv=pb.Argv(args=["sh", "-c", f'echo "$ETHER_TERMINAL_ID" > {fifo}; exec sleep 600']),
        cwd="/tmp",
        rows=24,
        cols=80,
    )
    watch = None
    terminal_id = ""
    try:
        with records_held(host):
            creating = host.terminals.CreateTerminal.future(request, timeout=60)
            terminal_id = read_fifo(fifo)  # its program runs; its record waits
            host.terminals.Resize(
                pb.ResizeRequest(terminal_id=terminal_id, rows=30, cols=100), timeout=30
            )
            listed_while_starting = _listed_ids(host)
            watch = host.terminals.WatchTerminals(
                pb.WatchTerminalsRequest(include_existing=True), timeout=60
            )
            # The listing is sent before anything else: once the probe's `created` is in, the
            # watch has listed what it lists.
            before_probe = []
            for event in watch:
                if event.terminal.id == probe.id:
                    break
                before_probe.append(event)
        created = creating.result().terminal
        assert (created.rows, created.cols) == (24, 80)
        close(host, terminal_id, grace=0)
        events = [e for e in before_probe if e.terminal.id == terminal_id]
        for event in watch:
            if event.terminal.id == terminal_id:
                events.append(event)
                if event.WhichOneof("event") == "closed":
                    break
        kinds = [e.WhichOneof("event") for e in events]
        assert kinds == ["created", "exited", "closed"], kinds
        told = events[0].terminal
        assert (told.rows, told.cols) == (24, 80), "the watch was told of it as it was later"
        assert told == created, "the watch was not told of it as created"
        assert probe.id in listed_while_starting
        assert terminal_id not in listed_while_starting, "listed before its start ended"
    finally:
        if watch is not None:
            watch.cancel()
        for leftover in {probe.id, terminal_id} & _listed_ids(host):
            close(host, leftover, grace=0)
