"""The runtime's behaviour beyond the conformance suite, through a real child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ether_agent_harness import ADAPTER, spawn


def test_sync_handler_sees_ctx_cancelled_and_the_result_is_cancelled(agent: Any) -> None:
    """A cancel frame sets ctx.cancelled for a thread-pool handler; the result is `cancelled`,
    and the process, told to stop right after, lets the handler finish unwinding first."""
    child = agent(
        """
        import time
        from ether_agent import Agent
        agent = Agent("t")
        @agent.action
        def spin(ctx):
            ctx.progress(0, message="spinning")
            while not ctx.cancelled.wait(0.01):
                pass
            print("saw the cancel")
        """
    )
    child.send({"type": "task", "id": "h-1", "action": "spin", "params": {}})
    # Cancel once the handler runs (a cancel before it starts means it never runs at all).
    assert child.read()["type"] == "progress"
    child.send({"type": "cancel", "id": "h-1"})
    result = child.read()
    assert result["status"] == "error" and result["error"]["code"] == "cancelled"
    assert child.close() == 0
    assert "saw the cancel" in child.stderr()


def test_output_partial_cost_next_actions_and_logs(agent: Any) -> None:
    """Output/Partial shape the result; ctx.cost fills metadata; ctx.log writes log frames."""
    child = agent(
        """
        from ether_agent import Agent, AgentError, NextAction, Output, Partial
        agent = Agent("t")
        @agent.action
        async def full(ctx):
            ctx.log.info("working", step=1)
            ctx.cost(0.5, model="m1", tokens=12)
            return Output({"a": 1}, next_actions=[NextAction("b", "go", {"x": 1}, "because")], cost=0.25)
        @agent.action
        async def half():
            return Partial([1], AgentError("budget_exceeded", "ran out"))
        """
    )
    child.send({"type": "task", "id": "h-1", "action": "full", "params": {}})
    log = child.read()
    assert log == {
        "type": "log",
        "level": "info",
        "msg": "working",
        "fields": {"step": 1},
        "task_id": "h-1",
    }
    result = child.read()
    assert result["status"] == "ok" and result["result"] == {"a": 1}
    assert result["metadata"] == {"cost": 0.75, "model": "m1", "extra": {"tokens": 12}}
    assert result["next_actions"] == [
        {"agent": "b", "action": "go", "params": {"x": 1}, "reason": "because"}
    ]
    child.send({"type": "task", "id": "h-2", "action": "half", "params": {}})
    result = child.read()
    assert result["status"] == "partial" and result["result"] == [1]
    assert result["error"] == {"code": "budget_exceeded", "message": "ran out"}
    assert child.close() == 0


def test_a_task_cancelled_before_it_starts_is_answered_once_and_never_runs(agent: Any) -> None:
    """A cancel read together with its task (one pipe read) comes before the handler starts."""
    child = agent(
        """
        from ether_agent import Agent
        agent = Agent("t")
        @agent.action
        async def work(ctx):
            ctx.log.info("handler ran")
            return "done"
        """
    )
    assert child.proc.stdin is not None
    task = {"type": "task", "id": "h-1", "action": "work", "params": {}}
    cancel = {"type": "cancel", "id": "h-1", "reason": "changed my mind"}
    child.proc.stdin.write(b"".join(json.dumps(f).encode() + b"\n" for f in (task, cancel)))
    child.proc.stdin.flush()
    answer = child.read()  # a log frame here would mean the handler ran
    assert answer["type"] == "result" and answer["id"] == "h-1", answer
    assert answer["status"] == "error" and answer["error"]["code"] == "cancelled", answer
    child.send({"type": "task", "id": "h-2", "action": "work", "params": {}})
    assert child.read()["type"] == "log"  # the next task runs, and h-1 got no second answer
    assert child.read() == {"type": "result", "id": "h-2", "status": "ok", "result": "done"}
    assert child.close() == 0


def test_an_action_taking_any_object_still_refuses_params_that_are_not_one(agent: Any) -> None:
    """``dict[str, Any]`` params skip the per-key walk, not the check that they are an object."""
    child = agent(
        """
        from typing import Any
        from ether_agent import Agent
        agent = Agent("t")
        @agent.action
        async def echo(params: dict[str, Any]) -> dict[str, Any]:
            return params
        """
    )
    assert child.hello["actions"][0]["params_schema"] == {"type": "object"}
    child.send({"type": "task", "id": "h-1", "action": "echo", "params": {"a": [1, {"b": None}]}})
    assert child.read() == {
        "type": "result",
        "id": "h-1",
        "status": "ok",
        "result": {"a": [1, {"b": None}]},
    }
    child.send({"type": "task", "id": "h-2", "action": "echo", "params": [1, 2]})
    refused = child.read()
    assert refused["status"] == "error" and refused["error"]["code"] == "invalid_params"
    assert "expected object, got array" in refused["error"]["message"]
    assert child.close() == 0


def test_uncaught_exception_is_internal_with_traceback(agent: Any) -> None:
    """Any other exception becomes error `internal` carrying data.traceback."""
    child = agent(
        """
        from ether_agent import Agent
        agent = Agent("t")
        @agent.action
        def boom(n: int):
            return 1 / n
        """
    )
    child.send({"type": "task", "id": "h-1", "action": "boom", "params": {"n": 0}})
    result = child.read()
    assert result["error"]["code"] == "internal"
    assert "ZeroDivisionError" in result["error"]["message"]
    assert "1 / n" in result["error"]["data"]["traceback"]
    assert child.close() == 0


def test_writes_to_fd1_and_child_processes_land_on_stderr(agent: Any) -> None:
    """C-level writes to fd 1 and a subprocess's stdout go to stderr; frames stay intact."""
    child = agent(
        """
        import os, subprocess
        from ether_agent import Agent
        agent = Agent("t")
        @agent.action
        def noisy():
            os.write(1, b"raw fd1 write\\n")
            subprocess.run(["echo", "child stdout"], check=True)
            return subprocess.run(["cat"], capture_output=True).stdout.decode()
        """
    )
    child.send({"type": "task", "id": "h-1", "action": "noisy", "params": {}})
    assert child.read() == {"type": "result", "id": "h-1", "status": "ok", "result": ""}
    assert child.close() == 0
    err = child.stderr()
    assert "raw fd1 write" in err and "child stdout" in err


def test_on_start_gets_config_and_fatal_error_exits_78(agent: Any) -> None:
    """on_start sees the welcome's config; a FatalError there is a fatal frame and exit 78."""
    child = agent(
        """
        from ether_agent import Agent, FatalError
        agent = Agent("t")
        @agent.on_start
        def check(config):
            if "key" not in config:
                raise FatalError("fatal_config", "config.key is required")
        """,
        config={},
    )
    assert child.read() == {
        "type": "fatal",
        "code": "fatal_config",
        "message": "config.key is required",
    }
    assert child.proc.wait(10) == 78


def test_sync_handler_calls_an_agent_through_the_host(agent: Any) -> None:
    """call_agent_sync sends a call frame from a worker thread and returns the reply."""
    child = agent(
        """
        from ether_agent import Agent
        agent = Agent("t")
        @agent.action
        def relay(ctx):
            out = ctx.call_agent_sync("other", "echo", {"x": 1}, deadline_ms=5000)
            return out["data"]
        """
    )
    child.send({"type": "task", "id": "h-1", "action": "relay", "params": {}})
    call = child.read()
    assert call == {
        "type": "call",
        "id": "a-1",
        "method": "agent.call",
        "task_id": "h-1",
        "params": {"agent": "other", "action": "echo", "params": {"x": 1}},
        "deadline_ms": 5000,
    }
    child.send({"type": "reply", "id": "a-1", "status": "ok", "result": {"data": {"y": 2}}})
    assert child.read()["result"] == {"y": 2}
    assert child.close() == 0


def test_handler_swallowing_cancellation_does_not_hold_the_exit(agent: Any) -> None:
    """At the end of the grace a stubborn handler's task is answered `cancelled` and the agent exits."""
    child = agent(
        """
        import asyncio
        from ether_agent import Agent
        agent = Agent("t")
        @agent.action
        async def stubborn():
            while True:
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    pass
        """
    )
    child.send({"type": "task", "id": "h-1", "action": "stubborn", "params": {}})
    child.send({"type": "shutdown", "grace_ms": 100})
    result = child.read()
    assert result["error"]["code"] == "cancelled"
    assert child.close() == 0


def test_load_failure_is_fatal(tmp_path: Path) -> None:
    """A module that fails to import is a fatal frame (agent_load_failed) and exit 78."""
    (tmp_path / "m.py").write_text("import no_such_module_anywhere\n")
    child = spawn(tmp_path, "--module", "m")
    frame = child.read()
    assert frame["type"] == "fatal" and frame["code"] == "agent_load_failed"
    assert "no_such_module_anywhere" in frame["message"]
    assert child.proc.wait(10) == 78


def test_describe_prints_actions_without_a_host(tmp_path: Path) -> None:
    """--describe prints the declared actions as JSON, no cookie needed."""
    (tmp_path / "m.py").write_text(
        textwrap.dedent(
            """
        def run(payload):
            "Echo the payload."
            return payload
        """
        )
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ether_agent",
            "--describe",
            "--path",
            str(tmp_path),
            "--module",
            "m",
            "--function",
            "run",
        ],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ADAPTER)},
        capture_output=True,
        check=True,
    )
    described = json.loads(out.stdout)
    assert described["actions"] == [
        {"name": "run", "description": "Echo the payload.", "params_schema": {"type": "object"}}
    ]
