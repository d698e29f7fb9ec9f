"""A bad [limits] table in the host config stops the start: exit 2 and one line naming the
key and the problem, before anything runs (resources.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.host._support import run_ether

BAD_LIMITS = [
    # (id, TOML text, words the one line must hold)
    ("negative", "[limits.agents]\nmemory = -1\n", ["limits.agents.memory", "negative"]),
    (
        "not-a-size",
        '[limits.terminals]\nmemory = "lots"\n',
        ["limits.terminals.memory", "'lots'", "not a size"],
    ),
    ("negative-text", '[limits.agents]\nfile_size = "-5MiB"\n', ["limits.agents.file_size"]),
    ("not-a-number", '[limits.agents]\npids = "many"\n', ["limits.agents.pids", "whole number"]),
    ("weight-range", "[limits.agents]\ncpu_weight = 20000\n", ["limits.agents.cpu_weight"]),
    ("unknown-key", "[limits.agents]\nthreads = 4\n", ["limits.agents", "'threads'", "pids"]),
    ("mechanism", '[limits]\nmechanism = "magic"\n', ["limits.mechanism", "auto, rlimit"]),
    ("not-a-table", "[limits]\nagents = 5\n", ["limits.agents", "table"]),
]


@pytest.mark.parametrize(
    ("toml", "words"), [b[1:] for b in BAD_LIMITS], ids=[b[0] for b in BAD_LIMITS]
)
def test_bad_limits_stop_the_start_with_one_line(
    tmp_path: Path, toml: str, words: list[str]
) -> None:
    config = tmp_path / "ether.toml"
    config.write_text(toml)
    result = run_ether(
        "--config", str(config), "--listen", "127.0.0.1:0", "--state-dir",
        str(tmp_path / "state"), "--log-format", "json", timeout=30,
    )  # fmt: skip
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], f"{word!r} missing from: {lines[0]}"
