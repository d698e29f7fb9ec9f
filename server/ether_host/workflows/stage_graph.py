"""The stages of a spec as a graph: which stages each one reads (``input_from``, a reduce's
previous stage, its ``when``), and why a reference is refused -- an unknown stage, a forward
reference, or one that closes a cycle (spelled out stage by stage).

Stages run in order, so a stage may only read earlier ones. Telling a forward reference that
closes a cycle from one that does not takes the graph's strongly connected components; every
check stays linear in the stages, or nearly (spec.py parses; this answers its questions).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ether_host.workflows.expr import ExprError, parse_condition

KNOWN_SHOWN = 20  # earlier stages listed in an "unknown stage" message
CYCLE_PATHS = 10  # cycles spelled out stage by stage; later ones are only named
CYCLE_SHOWN = 12  # stages of a cycle named in its message


def refused_reference(target: Any, name: str, index: int, layout: StageLayout) -> str:
    """Why stage ``name`` (at ``index``) may not read ``target``; '' when it may."""
    names = layout.names
    if target == name:
        return f"cycle: stage {name!r} reads its own data; only earlier stages may be named"
    if target not in layout.first:
        known = ", ".join(str(n) for n in names[: min(index, KNOWN_SHOWN)]) or "none"
        more = f" and {index - KNOWN_SHOWN} more" if index > KNOWN_SHOWN else ""
        return f"unknown stage {target!r}; earlier stages: {known}{more}"
    if layout.first[target] > index:
        if layout.in_cycle(name, target):
            loop = _cycle(str(target), name, layout.edges) if layout.take_search() else []
            if loop:
                steps = [name, *loop]
                if len(steps) > CYCLE_SHOWN:
                    steps = [*steps[: CYCLE_SHOWN - 2], f"... ({len(steps) - 1} stages)", name]
                return f"cycle: {' -> '.join(steps)}; only earlier stages may be named"
            return (
                f"cycle: stage {target!r} runs after {name!r} and reads it, directly or through "
                "other stages; only earlier stages may be named"
            )
        return (
            f"forward reference: stage {target!r} runs after {name!r}; "
            "stages run in order, so only earlier stages may be named"
        )
    return ""


@dataclass
class StageLayout:
    """The stage names in order, and which stages each one names (input_from, reduce, when),
    to tell a forward reference that closes a cycle from one that does not.

    Every check is linear in the stages, or nearly: names are looked up in ``first``,
    cycles found from the strongly connected components of ``edges`` (computed once), and
    only the first CYCLE_PATHS cycles are spelled out stage by stage."""

    names: list[Any]
    edges: dict[str, set[str]]
    first: dict[str, int] = field(default_factory=dict)  # name -> index of its first stage
    component: dict[str, int] | None = None
    searches: int = CYCLE_PATHS

    def in_cycle(self, name: str, target: str) -> bool:
        """Whether ``target`` reads ``name``, directly or not (``name`` reads ``target``)."""
        if self.component is None:
            self.component = _components(self.edges)
        found = self.component.get(name)
        return found is not None and found == self.component.get(target)

    def take_search(self) -> bool:
        self.searches -= 1
        return self.searches >= 0


def stage_edges(stages: list[Any]) -> dict[str, set[str]]:
    """Which stages each stage of a raw spec names (input_from, a reduce's previous stage, the
    stages its ``when`` reads), read before the spec is checked: a malformed stage names none."""
    edges: dict[str, set[str]] = {}
    previous = ""
    for item in stages:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        targets: set[str] = set()
        source = item.get("input_from")
        if isinstance(source, str) and source:
            targets.add(source.strip().split(".", 1)[0])
        elif item.get("reduce") and previous:
            targets.add(previous)
        if isinstance(item.get("when"), str):
            with contextlib.suppress(ExprError):
                targets.update(ref.stage for ref in parse_condition(item["when"]).refs)
        edges[item["name"]] = targets
        previous = item["name"]
    return edges


def _cycle(start: str, goal: str, edges: dict[str, set[str]]) -> list[str]:
    """A shortest path start -> ... -> goal along ``edges``, or []."""
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path: list[str] = []
            step: str | None = node
            while step is not None:
                path.append(step)
                step = parent[step]
            return path[::-1]
        for nxt in sorted(edges.get(node, ())):
            if nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    return []


def _components(edges: dict[str, set[str]]) -> dict[str, int]:
    """Strongly connected component of each stage (Tarjan's algorithm, without recursion)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    component: dict[str, int] = {}
    found = 0

    def visit(node: str) -> Iterator[str]:
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        return iter(sorted(edges.get(node, ())))

    for root in edges:
        if root in order:
            continue
        work = [(root, visit(root))]
        while work:
            node, pending = work[-1]
            for nxt in pending:
                if nxt not in order:
                    work.append((nxt, visit(nxt)))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], order[nxt])
            else:
                work.pop()
                if work:
                    above = work[-1][0]
                    low[above] = min(low[above], low[node])
                if low[node] == order[node]:
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component[member] = found
                        if member == node:
                            break
                    found += 1
    return component
