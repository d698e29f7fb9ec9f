"""What a stage reads and what it yields: input expansion, stage data, ``when`` lookups."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import structlog

from ether_host.workflows.expr import data_env
from ether_host.workflows.model import (
    RunRecord,
    StageRecord,
    StageState,
    TaskRecord,
    TaskState,
    output_json,
)
from ether_host.workflows.paths import Missing, resolve
from ether_host.workflows.spec import StageSpec

log = structlog.get_logger("ether.workflows")

NO_INPUT = object()
PLACEHOLDER = re.compile(r"^\$\{input(?:\.([^}]+))?\}$")


class InputError(Exception):
    """A stage's input_from names nothing in the data the earlier stage produced."""


def stage_data(record: StageRecord, fanned: bool) -> Any:
    """The data a stage passes on: its single task's data, or its tasks' data in order.

    Only succeeded tasks count (under a CONTINUE policy the failed ones are left
    out); tasks run because an agent proposed them are not part of it.
    """
    regular = [t for t in record.tasks if not t.proposed_by]
    if not fanned:
        task = regular[0] if regular else None
        return (
            task.result.data
            if task is not None and task.succeeded and task.result is not None
            else None
        )
    return [t.result.data for t in regular if t.succeeded and t.result is not None]


class StageInputs:
    """Reads earlier stages for one run: their data, their status, and a stage's inputs."""

    def __init__(self, run: RunRecord, fanned: dict[str, bool]) -> None:
        self.run = run
        self.fanned = fanned  # stage name -> its data is a list (one element per task)
        self._cache: dict[str, Any] = {}

    def data(self, name: str) -> Any:
        if name in self._cache:
            return self._cache[name]
        record = self.run.stage(name)
        value = stage_data(record, self.fanned.get(name, False))
        if record.state in StageState.DONE:
            self._cache[name] = value
        return value

    def status(self, name: str) -> str:
        return self.run.stage(name).state

    def when(self, spec: StageSpec) -> bool:
        return spec.when is None or spec.when.evaluate(data_env(self.status, self.data))

    def expand(
        self, spec: StageSpec
    ) -> tuple[list[tuple[int, int, str, str, dict[str, Any]]], bool]:
        """(input index, action index, agent, action, params) of every task, and whether the stage fans out."""
        inputs, fanned = self._inputs(spec)
        # Each action's params merged once; a map of 10,000 inputs plans 10,000 tasks each.
        actions = [(a.agent, a.action, {**spec.params, **a.params}) for a in spec.actions]
        tasks = []
        for input_index, element in enumerate(inputs):
            for action_index, (agent, action, merged) in enumerate(actions):
                params, placed = fill(merged, element)
                if element is not NO_INPUT and not placed:
                    params[spec.input_param] = _copy(element)
                tasks.append((input_index, action_index, agent, action, params))
        return tasks, fanned or bool(spec.map)

    def _inputs(self, spec: StageSpec) -> tuple[list[Any], bool]:
        if spec.inputs:
            return list(spec.inputs), True
        source = spec.input_from
        if source is None:
            return [NO_INPUT], False
        if spec.reduce:
            return [self._gather(spec)], False
        value = resolve(self.data(source.stage), source.keys, f"{source.stage}.data")
        if isinstance(value, Missing):
            raise InputError(f"input_from {source}: {value.where}")
        if isinstance(value, list):
            return value, True
        return [value], False

    def _gather(self, spec: StageSpec) -> list[Any]:
        """The list a reduce task receives."""
        source = spec.input_from
        assert source is not None
        record = self.run.stage(source.stage)
        if not source.keys and (self.fanned.get(source.stage, False) or spec.reduce_outputs):
            items: list[Any] = []
            for task in (t for t in record.tasks if not t.proposed_by):
                if task.result is None:
                    continue
                if task.succeeded:
                    items.append(
                        output_json(task.result) if spec.reduce_outputs else task.result.data
                    )
                elif spec.reduce_include_failed and task.state == TaskState.FAILED:
                    items.append(output_json(task.result))
            return items
        value = resolve(self.data(source.stage), source.keys, f"{source.stage}.data")
        if isinstance(value, Missing):
            raise InputError(f"input_from {source}: {value.where}")
        if value is None and not source.keys:
            return []
        return value if isinstance(value, list) else [value]


_IMMUTABLE = (str, int, float, bool, type(None))


def _copy(value: Any) -> Any:
    """A deep copy of JSON ``value``; a string or number is its own (deepcopy's memo costs more)."""
    return value if isinstance(value, _IMMUTABLE) else copy.deepcopy(value)


def fill(value: Any, element: Any) -> tuple[Any, bool]:
    """A deep copy of ``value`` with "${input}" / "${input.path}" strings replaced; whether any was."""
    if isinstance(value, dict) and not value:
        return {}, False  # most stages' params: none besides the input
    if isinstance(value, str):
        match = PLACEHOLDER.match(value)
        if match is None:
            return value, False
        if element is NO_INPUT:
            raise InputError(f"{value!r}: this stage has no input (give inputs or input_from)")
        if match.group(1) is None:
            return _copy(element), True
        found = resolve(element, tuple(match.group(1).split(".")), "input")
        if isinstance(found, Missing):
            raise InputError(f"{value!r}: {found.where}")
        return _copy(found), True
    if isinstance(value, dict):
        pairs = [(k, fill(v, element)) for k, v in value.items()]
        return {k: v for k, (v, _) in pairs}, any(used for _, (_, used) in pairs)
    if isinstance(value, list):
        items = [fill(v, element) for v in value]
        return [v for v, _ in items], any(used for _, used in items)
    return _copy(value), False


def new_task(
    run: RunRecord,
    stage: str,
    input_index: int,
    action_index: int,
    agent: str,
    action: str,
    params: dict[str, Any],
    proposed_by: str = "",
    depth: int = 0,
) -> TaskRecord:
    run.next_task += 1
    return TaskRecord(
        run.next_task,
        f"{run.id}-{run.next_task}",
        stage,
        input_index,
        action_index,
        agent,
        action,
        params,
        proposed_by=proposed_by,
        depth=depth,
    )


def proposed_tasks(
    run: RunRecord, spec: StageSpec, task: TaskRecord, followed: int
) -> Iterator[TaskRecord]:
    """New tasks for the next actions ``task`` proposed that the stage's ``follow`` bounds let
    run, ``followed`` of them run in the stage already."""
    follow = spec.follow
    assert follow is not None and task.result is not None
    if task.depth >= follow.max_depth:
        return
    for proposal in task.result.next_actions:
        if followed >= follow.max_actions:
            log.info(
                "next actions not followed: max_actions reached",
                run_id=run.id,
                stage=spec.name,
                max_actions=follow.max_actions,
            )
            return
        agent = str(proposal.get("agent") or "")
        if not agent or (follow.allowed_agents and agent not in follow.allowed_agents):
            continue
        params = proposal.get("params")
        followed += 1
        yield new_task(
            run,
            spec.name,
            task.input_index,
            task.action_index,
            agent,
            str(proposal.get("action") or ""),
            params if isinstance(params, dict) else {},
            proposed_by=task.task_id,
            depth=task.depth + 1,
        )
