"""Fixtures the gateway's tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._support import Recorder


@pytest.fixture(scope="module")
def web() -> Iterator[Recorder]:
    """A recording HTTP server on loopback, one per test module: what agents fetch."""
    server = Recorder()
    yield server
    server.stop()
