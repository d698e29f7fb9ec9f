"""Fixtures shared by every suite: a real host on a free port, per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.host import HostProcess


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A real `ether serve` for the tests of one module; stopped (and checked) afterwards."""
    process = HostProcess(tmp_path_factory.mktemp("host-state"))
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


@pytest.fixture
def fresh_host(tmp_path: Path) -> Iterator[HostProcess]:
    """A host of the test's own, for tests that kill or stop it."""
    process = HostProcess(tmp_path / "state")
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()
