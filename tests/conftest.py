"""Fixtures shared by every suite: a real host on a free port, per module."""

from __future__ import annotations

import signal
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from types import FrameType

import pytest

from tests.notifications.support import Receiver, receiving
from tests.support.host import HostProcess


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    """A run stopped by SIGTERM (a CI job's time limit, `kill`) ends as Ctrl-C does: the tests'
    finally blocks and the fixtures stop their hosts, and tests/support/host.py stops any
    left at exit. Python's default for SIGTERM ends the process at once, hosts left running."""
    signal.signal(signal.SIGTERM, _interrupted)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A real `ether serve` for the tests of one module; stopped (and checked) afterwards."""
    process = HostProcess(tmp_path_factory.mktemp("host-state"))
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    """A webhook receiver on loopback for the tests of one module (tests/notifications/support.py);
    a module with a receiver of another kind (an OTLP one) defines its own."""
    with receiving() as server:
        yield server


@pytest.fixture
def fresh_host(tmp_path: Path) -> Iterator[HostProcess]:
    """A host of the test's own, for tests that kill or stop it."""
    process = HostProcess(tmp_path / "state")
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    """A failing test shows the last log lines of every host it used: the hosts still running
    and those it started (the module's host included)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    began = time.monotonic() - report.duration
    for index, host in enumerate(sorted(HostProcess.started, key=lambda h: h.started_at)):
        if host.process.poll() is not None and host.started_at < began:
            continue
        state = "running" if host.process.poll() is None else f"exited {host.process.poll()}"
        report.sections.append(
            (
                f"host {index} ({state}, pid {host.process.pid}): last log lines",
                "\n".join(host.last_lines()),
            ),
        )
