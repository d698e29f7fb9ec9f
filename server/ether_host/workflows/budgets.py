"""A run's budgets and a stage's, side by side: what one more task may use, and when to halt.

Every check reads both scopes (the run's budget and usage, then the stage's) and
returns the sentence a halted run reports, or None; the engine does the halting.
"""

from __future__ import annotations

from collections.abc import Iterator

from ether_host.agents import Budget
from ether_host.workflows.model import RunRecord, StageRecord, StageState, Usage
from ether_host.workflows.spec import StageSpec


def _scopes(
    run: RunRecord, spec: StageSpec, stage: StageRecord
) -> Iterator[tuple[str, Budget, Usage]]:
    yield "run", run.spec.budget, run.usage
    yield f"stage {spec.name!r}", spec.budget, stage.usage


def limited(run: RunRecord, spec: StageSpec) -> bool:
    """Whether the run's or the stage's budget limits cost, tasks or iterations. Without such a
    limit a stage's tasks skip the checks below (only their count is kept)."""
    return any(
        b.max_cost is not None or b.max_tasks is not None or b.max_iterations is not None
        for b in (run.spec.budget, spec.budget)
    )


def charge_start(run: RunRecord, spec: StageSpec, stage: StageRecord) -> str | None:
    """Count one more task start against max_tasks; or, once max_tasks or max_cost is used
    up, count nothing and say why it may not start."""
    for what, budget, usage in _scopes(run, spec, stage):
        if budget.max_tasks is not None and usage.tasks >= budget.max_tasks:
            return (
                f"{what} budget max_tasks={budget.max_tasks} used up: {usage.tasks} task(s) started"
            )
        if budget.max_cost is not None and usage.cost >= budget.max_cost:
            return f"{what} budget max_cost={budget.max_cost:g} used up: spent {usage.cost:g}"
    run.usage.tasks += 1
    stage.usage.tasks += 1
    return None


def spend(run: RunRecord, stage: StageRecord, cost: float) -> None:
    run.usage.cost += cost
    stage.usage.cost += cost


def cost_used_up(run: RunRecord, spec: StageSpec, stage: StageRecord) -> str | None:
    """Why the run must halt now that a max_cost is spent while tasks of this stage are pending
    or running; None when it may go on. Stages still to come are left to run_cost_used_up, once
    this stage has ended: a stage that ran all its tasks within the budget ends as they did."""
    counts = stage.counts  # the task that just ended is counted as finished already
    if counts.pending + counts.running == 0:
        return None
    for what, budget, usage in _scopes(run, spec, stage):
        if budget.max_cost is not None and usage.cost >= budget.max_cost:
            return f"{what} budget max_cost={budget.max_cost:g} used up: spent {usage.cost:g}"
    return None


def run_cost_used_up(run: RunRecord, index: int) -> str | None:
    """Why the run must halt after stage ``index`` ended: the run's max_cost is spent and
    stages are still to come (a stage's own budget governs its own tasks only, as its max_tasks
    does); None when it may go on."""
    budget, usage = run.spec.budget, run.usage
    if budget.max_cost is None or usage.cost < budget.max_cost:
        return None
    if not any(s.state == StageState.PENDING for s in run.stages[index + 1 :]):
        return None
    return f"run budget max_cost={budget.max_cost:g} used up: spent {usage.cost:g}"


def task_budget(run: RunRecord, spec: StageSpec, stage: StageRecord) -> Budget:
    """What is left of the run's and the stage's budgets, for one task."""
    scopes = [(budget, usage) for _, budget, usage in _scopes(run, spec, stage)]
    costs = [b.max_cost - u.cost for b, u in scopes if b.max_cost is not None]
    tasks = [b.max_tasks - u.tasks for b, u in scopes if b.max_tasks is not None]
    iterations = [b.max_iterations for b, _ in scopes if b.max_iterations is not None]
    return Budget(
        max_cost=max(0.0, min(costs)) if costs else None,
        max_iterations=min(iterations) if iterations else None,
        max_tasks=max(0, min(tasks)) if tasks else None,
    )
