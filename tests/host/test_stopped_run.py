"""A test run stopped by SIGTERM (a CI job's time limit, `kill`) leaves no host running
(README, "Two commands"): tests/conftest.py turns SIGTERM into Ctrl-C's ending, and
tests/support/host.py stops at exit the hosts no test stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.host import ROOT


def test_a_run_stopped_by_sigterm_stops_the_host_it_started(tmp_path: Path) -> None:
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "--basetemp",
            str(tmp_path / "inner"),
            str(ROOT / "tests" / "support" / "held_host_case.py"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert run.stdout is not None
    seen: list[str] = []
    try:
        for raw in run.stdout:  # until the inner test says its host serves
            seen.append(raw.decode(errors="replace"))
            if seen[-1].startswith("HELD "):
                break
        else:
            raise AssertionError("the inner run ended before its host served:\n" + "".join(seen))
        host_pid = int(seen[-1].split()[1])
        assert _is_a_host(host_pid)
        run.send_signal(signal.SIGTERM)
        output = "".join(seen) + run.communicate(timeout=60)[0].decode(errors="replace")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    leaked = _is_a_host(host_pid)
    if leaked:  # not left behind by this test either
        os.kill(host_pid, signal.SIGTERM)
    assert "KeyboardInterrupt" in output, output
    assert not leaked, f"host {host_pid} outlived the stopped run:\n{output}"


def _is_a_host(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) `ether` process."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and any(part.endswith(b"ether") for part in command[:2])
