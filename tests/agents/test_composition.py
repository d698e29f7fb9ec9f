"""Agents calling agents through the host: parents, budgets, depth, cycles."""

from __future__ import annotations

import pytest

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, EXAMPLES, deploy
from tests.support.calls import budget, data, execute
from tests.support.host import ROOT, HostProcess


@pytest.fixture(scope="module", autouse=True)
def agents(host: HostProcess) -> None:
    deploy(host, AGENTS / "worker")
    deploy(host, AGENTS / "worker", name="partner")
    deploy(host, EXAMPLES / "scout")


def test_agent_calls_another_agent(host: HostProcess) -> None:
    """worker.relay -> scout.analyze_file: the child's AgentOutput comes back to the parent."""
    output = execute(
        host,
        "worker",
        "relay",
        {
            "agent": "scout",
            "action": "analyze_file",
            "params": {"path": str(ROOT / "README.md")},
        },
    )
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    child = data(output)
    assert child["status"] == "SUCCESS"
    assert child["agent"] == "scout"
    assert child["data"]["lines"] > 10
    assert child["task_id"].startswith(output.task_id + ".")


def test_child_errors_come_back_as_outputs(host: HostProcess) -> None:
    output = execute(host, "worker", "relay", {"agent": "nobody", "action": "x", "params": {}})
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code in ("not_found", "agent_error")
    assert "nobody" in output.error.message


def test_cycle_back_into_a_busy_agent_is_admitted(host: HostProcess) -> None:
    """worker -> partner -> worker completes at once even when every slot of worker is taken
    by its own ancestors: a call from a task's descendants is admitted re-entrantly."""
    output = execute(
        host,
        "worker",
        "relay",
        {
            "agent": "partner",
            "action": "relay",
            "params": {"agent": "worker", "action": "add", "params": {"a": 1, "b": 2}},
        },
        timeout=20,
    )
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    assert data(output)["data"]["data"] == {"sum": 3}


def test_runaway_recursion_stops_at_the_depth_limit(host: HostProcess) -> None:
    """Each level returns its child's output; the level past the limit is refused at once."""
    level = data(execute(host, "worker", "recurse", {"depth": 20}, timeout=30))
    depth = 1
    while level.get("status") == "SUCCESS":
        level, depth = level["data"], depth + 1
    assert level["status"] == "ERROR"
    assert level["error"]["code"] == "depth_exceeded"
    assert "deeper than 8" in level["error"]["message"]
    assert depth == 8  # the task at depth 8 failed: its call to depth 9 was refused
    assert data(execute(host, "worker", "recurse", {"depth": 3}))["data"]["data"]["data"] == {
        "bottom": True
    }


def test_child_inherits_the_remaining_budget(host: HostProcess) -> None:
    """A child call reports its cost to the parent; the parent's max_cost bounds the children."""
    output = execute(
        host,
        "worker",
        "relay",
        {"agent": "partner", "action": "costly", "params": {"cost": 0.5}},
        context=agent_io_pb2.TaskContext(budget=budget(max_cost=1.0)),
    )
    assert output.metadata.cost == pytest.approx(0.5)
    over = execute(
        host,
        "worker",
        "relay",
        {"agent": "partner", "action": "costly", "params": {"cost": 2.0}},
        context=agent_io_pb2.TaskContext(budget=budget(max_cost=1.0)),
    )
    assert data(over)["error"]["code"] == "budget_exceeded"
