"""A real host for the terminal tests, with small limits so the limit paths are quick to reach."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.host import HostProcess

CONFIG = """
[terminals]
max_terminals_per_owner = 12
max_terminals = 40
close_grace = 1.0
"""


def start_host(state: Path, config: str = CONFIG, *args: str) -> HostProcess:
    path = state.parent / f"{state.name}.toml"
    path.write_text(config)
    process = HostProcess(state, "--config", str(path), *args)
    process.wait_serving()
    return process


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A real `ether serve` with terminal limits from CONFIG, shared by one module's tests."""
    process = start_host(tmp_path_factory.mktemp("terminals") / "state")
    try:
        yield process
    finally:
        process.stop()
