"""Fixtures of the adapter's own tests."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ether_agent_harness import Child, spawn


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Any]:
    """``agent(source, config={}, env={})``: serve ``source`` as module ``m``; returns the welcomed
    Child."""
    children: list[Child] = []

    def start(
        source: str, config: dict[str, Any] | None = None, env: dict[str, str] | None = None
    ) -> Child:
        (tmp_path / "m.py").write_text(textwrap.dedent(source))
        child = spawn(tmp_path, "--module", "m", env=env)
        children.append(child)
        hello = child.read()
        assert hello["type"] == "hello", hello
        child.hello = hello  # type: ignore[attr-defined]
        child.send(
            {
                "type": "welcome",
                "protocol": 1,
                "max_frame": 1 << 24,
                "config": config or {},
                "log_level": "debug",
            }
        )
        return child

    yield start
    for child in children:
        if child.proc.poll() is None:
            child.proc.kill()
            child.proc.wait()
