"""Run only by tests/host/test_stopped_run.py (the name keeps it out of collection), with
``-s``: a test that starts a host, prints its pid, and waits until its run is stopped."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.support.host import HostProcess


def test_hold_a_host(tmp_path: Path) -> None:
    host = HostProcess(tmp_path / "state")
    host.wait_serving()
    print(f"HELD {host.process.pid}", flush=True)
    threading.Event().wait()  # until the run is stopped; no finally stops the host here
