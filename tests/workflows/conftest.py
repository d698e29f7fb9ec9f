"""Workflow tests share one host per module with the `flow` test agent deployed."""

from __future__ import annotations

import pytest

from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess


@pytest.fixture(scope="module")
def flow(host: HostProcess) -> str:
    """The `flow` agent (tests/agents/flow), running in the module's host."""
    return deploy(host, AGENTS / "flow")
