"""docs/limits.md, "Resources of agent replicas and terminals": a task running on a replica the
kernel ends for one of its limits fails `UNAVAILABLE`, reason `AGENT_DIED`, with the words of
the replica's exit reason -- for memory (tests/agents/test_resources.py), and for the two limits
whose signal ends the process: CPU time (SIGXCPU) and file size (SIGXFSZ).

Before, only the memory kill was named in the task's error: the CPU time and file size limits
showed in the exit reason (WatchEvents) alone, and the caller read "died while running task".
The agents are copies of tests/agents/drainer (`spin` burns CPU) and tests/agents/scribe
(`fill_unguarded` writes with SIGXFSZ at its default action), each with an agent.toml
`[limits]` lowering the host's unlimited.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, deploy, reasons_until_restarted, remove_agent
from tests.support.calls import agent_input, data, details, execute
from tests.support.host import HostProcess

BUDGET = 60.0  # seconds for the kernel and the host to act, on a loaded 2-core machine


@dataclass(frozen=True)
class Case:
    """An agent that runs into one limit: its folder under tests/agents, its agent.toml
    [limits], the task that passes the limit, the words the exit reason and the task's error
    say, and a task the restarted replica answers (with its answer)."""

    folder: str
    limits: str
    past: tuple[str, dict[str, Any]]
    words: str
    after: tuple[str, dict[str, Any]]
    answer: dict[str, Any]


CASES = {
    "cpu_time": Case(
        "drainer",
        "cpu_time = 2",
        ("spin", {"seconds": 600}),
        "CPU time limit 2 s exceeded",
        ("work", {"ms": 1}),
        {"worked": 1},
    ),
    "file_size": Case(
        "scribe",
        'file_size = "1MiB"',
        ("fill_unguarded", {"name": "big", "size": 4 << 20}),
        "file size limit 1 MiB exceeded",
        ("fill", {"name": "after", "size": 1024}),
        {"written": 1024, "error": "", "on_disk": 1024},
    ),
}


def deploy_limited(host: HostProcess, tmp_path: Path, case: Case, name: str) -> str:
    """A copy of ``case``'s agent whose agent.toml has its [limits], deployed as ``name``."""
    folder = tmp_path / name
    shutil.copytree(AGENTS / case.folder, folder, ignore=shutil.ignore_patterns("__pycache__"))
    with (folder / "agent.toml").open("a") as manifest:
        manifest.write(f"\n[limits]\n{case.limits}\n")
    return deploy(host, folder, name=name)


@pytest.mark.parametrize("limit", list(CASES))
def test_an_execute_on_a_replica_killed_for_its_limit_fails_naming_it(
    host: HostProcess, tmp_path: Path, limit: str
) -> None:
    """The task that passes the limit fails as under a memory kill: UNAVAILABLE, AGENT_DIED,
    its message saying which limit and its value; the exit reason says the same, and the
    replica restarts and answers."""
    case = CASES[limit]
    name = deploy_limited(host, tmp_path, case, f"limited-{limit.replace('_', '-')}")
    try:
        with pytest.raises(grpc.RpcError) as died:
            execute(host, name, *case.past, timeout=BUDGET)
        assert died.value.code() == grpc.StatusCode.UNAVAILABLE, died.value
        assert details(died.value)["ErrorInfo"].reason == "AGENT_DIED", died.value
        message = died.value.details() or ""
        assert f"agent {name} process " in message and " died while running task " in message
        assert f": {case.words} (" in message, message
        seen = reasons_until_restarted(host, name)
        assert any(r.startswith(f"BACKOFF: {case.words} (killed by SIG") for r in seen), seen
        assert data(execute(host, name, *case.after, timeout=BUDGET)) == case.answer
    finally:
        remove_agent(host, name)


@pytest.mark.parametrize("limit", list(CASES))
def test_a_pipe_batch_task_on_a_replica_killed_for_its_limit_fails_naming_it(
    host: HostProcess, tmp_path: Path, limit: str
) -> None:
    """The same through Pipe, whose batch is sent straight to the agent (agents/batch.py: its
    tasks fail in the link's read callback, before the exit is known): the task's output is
    ERROR `agent_died` with the limit's words, and an echo of the same batch is answered."""
    case = CASES[limit]
    name = deploy_limited(host, tmp_path, case, f"piped-{limit.replace('_', '-')}")
    try:
        action, params = case.past
        request = agent_io_pb2.PipeRequest(
            inputs=[agent_input(name, action, params, task_id="past")]
        )
        (output,) = [
            o for r in host.agents.Pipe(iter([request]), timeout=BUDGET) for o in r.outputs
        ]
        assert output.status == agent_io_pb2.TASK_STATUS_ERROR, output
        assert output.error.code == "agent_died", output.error
        assert f": {case.words} (" in output.error.message, output.error.message
    finally:
        remove_agent(host, name)
