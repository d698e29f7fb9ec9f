"""One list of host calls: the one vectors/host_calls.json expects every SDK's conformance agent to
report (each SDK's call lists, plus agent.call) is the list the host serves.

The host's ``term.*`` list is ``TERMINAL_CALLS`` (its handler table is built from it); the
gateway's ``ctx.*``, ``msg.*`` and ``net.fetch`` are the method names its call handlers compare
with, read from their source (they have no list of their own).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from ether_host.terminals import TERMINAL_CALLS

HERE = Path(__file__).resolve().parent
HOST = HERE.parents[1] / "server" / "ether_host"
METHOD = re.compile(r"^(agent|ctx|msg|net|term)\.[a-z_]+$")
# The modules that serve host calls other than term.* (or register them with the dispatcher).
SERVING = ("agents/dispatch.py", "gateway/calls.py", "gateway/usecases.py")


def vector_calls() -> list[str]:
    vector = json.loads((HERE / "vectors" / "host_calls.json").read_text("utf-8"))
    [expect] = [step["expect"] for step in vector["steps"] if "expect" in step]
    calls: list[str] = expect["result"]["$exact"]["calls"]
    return calls


def _method_names(path: Path) -> set[str]:
    """String constants of ``path`` that are whole method names (docstrings left out)."""
    tree = ast.parse(path.read_text("utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and METHOD.match(node.value)
    }


def host_calls() -> set[str]:
    served = set(TERMINAL_CALLS)
    for module in SERVING:
        served |= _method_names(HOST / module)
    return served


def test_the_vector_lists_each_call_once_in_order() -> None:
    """The expected list is sorted and has no repeats, so the SDKs report it the same way."""
    calls = vector_calls()
    assert calls == sorted(set(calls))


def test_the_sdks_list_is_the_list_the_host_serves() -> None:
    """Every call the SDKs know is served by the host, and every call the host serves is known
    to the SDKs: a method added on one side only fails here (or in the host_calls vector)."""
    assert set(vector_calls()) == host_calls()


def test_the_term_calls_are_the_hosts_terminal_calls() -> None:
    """The term.* part, against the host's own tuple."""
    assert [c for c in vector_calls() if c.startswith("term.")] == sorted(TERMINAL_CALLS)
