"""How an agent starts: the command line it is given and the parent-death signal it arms."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ether_agent_harness import ADAPTER, spawn

# An action that reads the parent-death signal back (prctl PR_GET_PDEATHSIG). The kernel keeps
# it per thread: async, so it runs on the main thread, which armed it.
PDEATHSIG_MODULE = """
    import ctypes
    from ether_agent import Agent
    agent = Agent("t")
    @agent.action
    async def pdeathsig():
        signum = ctypes.c_int(0)
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.prctl(2, ctypes.byref(signum), 0, 0, 0) == 0, ctypes.get_errno()
        return signum.value
    """


def test_the_agent_arms_sigterm_as_its_parent_death_signal(agent: Any) -> None:
    """Protocol rule 12: the kernel sends the agent SIGTERM when its parent dies, so a host
    killed with -9 does not leave it running (the 1 s parent-pid poll is only the backstop)."""
    child = agent(PDEATHSIG_MODULE)
    child.send({"type": "task", "id": "h-1", "action": "pdeathsig", "params": {}})
    result = child.read()
    assert result["status"] == "ok", result
    assert result["result"] == int(signal.SIGTERM)
    assert child.close() == 0


def test_short_options_name_the_module_and_the_function(tmp_path: Path) -> None:
    """``-m M -f F`` serves F of M, as ``--module M --function F`` does."""
    (tmp_path / "seeds.py").write_text("def run(payload):\n    return {'got': payload}\n")
    child = spawn(tmp_path, "-m", "seeds", "-f", "run")
    hello = child.read()
    assert [a["name"] for a in hello["actions"]] == ["run"]
    child.send({"type": "welcome", "protocol": 1, "config": {}})
    child.send({"type": "task", "id": "h-1", "action": "run", "params": {"a": 1}})
    result = child.read()
    assert result["status"] == "ok" and result["result"] == {"got": {"a": 1}}
    assert child.close() == 0


def _command_line(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "m.py").write_text(
        textwrap.dedent(
            """
            def run(payload):
                return payload
            """
        )
    )
    return subprocess.run(
        [sys.executable, "-m", "ether_agent", "--path", str(tmp_path), *args],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ADAPTER)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_command_line_with_a_mistake_gets_the_usage_and_exit_2(tmp_path: Path) -> None:
    """An option the SDK does not know, or one without its value, is refused with argparse's
    usage message naming it; nothing is served."""
    unknown = _command_line(tmp_path, "--module", "m", "--verbose", "yes")
    assert unknown.returncode == 2, unknown.stderr
    assert "usage: python -m ether_agent" in unknown.stderr
    assert "unrecognized arguments: --verbose yes" in unknown.stderr
    missing = _command_line(tmp_path, "--module", "m", "--function")
    assert missing.returncode == 2, missing.stderr
    assert "argument --function/-f: expected one argument" in missing.stderr
    no_module = _command_line(tmp_path, "--function", "run")
    assert no_module.returncode == 2, no_module.stderr
    assert "the following arguments are required: --module/-m" in no_module.stderr


def test_help_lists_every_option(tmp_path: Path) -> None:
    """``--help`` prints the options, --describe among them, and exits 0."""
    shown = _command_line(tmp_path, "--help")
    assert shown.returncode == 0, shown.stderr
    for option in ("--module", "--function", "--path", "--describe"):
        assert option in shown.stdout
