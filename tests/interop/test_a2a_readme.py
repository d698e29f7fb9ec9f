"""The README's A2A example (between the `a2a` markers), run verbatim against a real host with
the example report agent deployed: only the address changes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.host._support import README_ADDRESS, readme_commands
from tests.support.agents import EXAMPLES, deploy
from tests.support.host import ROOT, HostProcess


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("a2a-readme"))
    try:
        process.wait_serving()
        deploy(process, EXAMPLES / "report")
        yield process
    finally:
        process.stop()


def test_the_readme_a2a_call_runs_verbatim(host: HostProcess) -> None:
    [command] = readme_commands("a2a")
    assert README_ADDRESS in command
    done = subprocess.run(
        ["bash", "-c", command.replace(README_ADDRESS, host.address)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("report: ") and "render" in lines[0]
    assert lines[1].startswith("task a2a-")
    assert lines[-1] == "status: TASK_STATE_COMPLETED"
    assert "Token in code" in done.stdout  # the Markdown the agent rendered
