"""Reports of a run, for people and language models: JSON and Markdown.

Both are rendered from the run's API JSON (``Run``) and its tasks (``RunTask``),
so a report of a finished run read back from the store and one of a live run
look the same. JSON holds everything (the seeds' JSON aggregator: summary
counts, total cost and time, every task's output, errors with tracebacks);
Markdown holds a summary table, a table per stage, a section per task, the
errors and the result, with long values cut short.

Tasks come as an iterable and are rendered one at a time, with the size of
what is written so far counted: a run of 100,000 tasks is read page by page,
and a report past its size bound stops being made there (``TooLarge``) rather
than after the whole of it was held in memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from ether_host.workflows.model import parse_duration

JSON_TYPE = "application/json"
MARKDOWN_TYPE = "text/markdown; charset=utf-8"
MARKDOWN_VALUE_CHARS = 4000


def _short(state: str, prefix: str) -> str:
    return str(state or "").removeprefix(prefix)


def _seconds(usage: dict[str, Any] | None) -> float:
    return round(parse_duration(str((usage or {}).get("elapsed") or "0s")), 3)


def _counts(raw: dict[str, Any] | None) -> dict[str, int]:
    raw = raw or {}
    return {
        k: int(raw.get(k) or 0)
        for k in ("total", "succeeded", "failed", "cancelled", "running", "pending")
    }


def _error_entry(task: dict[str, Any]) -> dict[str, Any] | None:
    output = task.get("output") or {}
    error = output.get("error")
    if not error:
        return None
    details = dict(error.get("details") or {})
    traceback = details.pop("traceback", "")
    return {
        "task_id": task.get("task_id", ""),
        "stage": task.get("stage", ""),
        "agent": task.get("agent", ""),
        "action": task.get("action", ""),
        "state": _short(task.get("state", ""), "RUN_TASK_STATE_"),
        "code": error.get("code", ""),
        "message": error.get("message", ""),
        "retryable": bool(error.get("retryable")),
        "traceback": traceback,
        "details": details,
    }


def _task_entry(task: dict[str, Any]) -> dict[str, Any]:
    output = task.get("output") or {}
    meta = output.get("metadata") or {}
    return {
        "task_id": task.get("task_id", ""),
        "stage": task.get("stage", ""),
        "agent": task.get("agent", ""),
        "action": task.get("action", ""),
        "input_index": int(task.get("input_index") or 0),
        "action_index": int(task.get("action_index") or 0),
        "state": _short(task.get("state", ""), "RUN_TASK_STATE_"),
        "status": _short(output.get("status", ""), "TASK_STATUS_"),
        "attempts": int(task.get("attempts") or 0),
        "duration_s": round(parse_duration(str(meta.get("duration") or "0s")), 6),
        "cost": float(meta.get("cost") or 0.0),
        "model": meta.get("model", ""),
        "params": task.get("params") or {},
        "data": output.get("data"),
        "error": _error_entry(task),
        "next_actions": output.get("next_actions") or [],
        "proposed_by": task.get("proposed_by", ""),
        "started_at": task.get("started_at", ""),
        "ended_at": task.get("ended_at", ""),
    }


class TooLarge(Exception):
    """The report would be larger than the bound it was asked under."""


class _Budget:
    """Bytes written so far against a bound (None: no bound)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0

    def take(self, text: str) -> str:
        if self.limit is not None:
            self.used += len(text.encode())
            if self.used > self.limit:
                raise TooLarge(f"more than {self.limit} bytes")
        return text


def build(run: dict[str, Any], tasks: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The report as a JSON document."""
    usage = run.get("usage") or {}
    spec = run.get("spec") or {}
    stages = [
        {
            "name": stage.get("name", ""),
            "state": _short(stage.get("state", ""), "STAGE_STATE_"),
            "tasks": _counts(stage.get("tasks")),
            "cost": float((stage.get("usage") or {}).get("cost") or 0.0),
            "time_s": _seconds(stage.get("usage")),
            "error": stage.get("error"),
        }
        for stage in run.get("stages") or []
    ]
    entries = [_task_entry(t) for t in tasks]
    return {
        "run": {
            "id": run.get("id", ""),
            "name": run.get("name", ""),
            "description": spec.get("description", ""),
            "state": _short(run.get("state", ""), "RUN_STATE_"),
            "error": run.get("error"),
            "creator": run.get("creator", ""),
            "created_at": run.get("created_at", ""),
            "started_at": run.get("started_at", ""),
            "ended_at": run.get("ended_at", ""),
            "resume_count": int(run.get("resume_count") or 0),
        },
        "summary": {
            "state": _short(run.get("state", ""), "RUN_STATE_"),
            "tasks": _counts(run.get("tasks")),
            "total_cost": float(usage.get("cost") or 0.0),
            "total_time_s": _seconds(usage),
            "tasks_started": int(usage.get("tasks") or 0),
            "stages": len(stages),
        },
        "stages": stages,
        "tasks": entries,
        "errors": [e["error"] for e in entries if e["error"] is not None],
        "result": run.get("result"),
    }


def _nested(value: Any, level: int) -> str:
    """``value`` as json.dumps(indent=2) writes it ``level`` levels deep in a document (JSON
    text has no raw newline inside a value, so the lines can be indented after the fact)."""
    return json.dumps(value, indent=2).replace("\n", "\n" + "  " * level)


def render_json(
    run: dict[str, Any], tasks: Iterable[dict[str, Any]], limit: int | None = None
) -> tuple[str, str]:
    """The document ``build`` makes, as json.dumps(indent=2) writes it, made one task at a
    time: TooLarge once it passes ``limit`` bytes."""
    head = build(run, [])
    budget = _Budget(limit)
    parts = [budget.take("{\n")]
    for key in ("run", "summary", "stages"):
        parts.append(budget.take(f"  {json.dumps(key)}: {_nested(head[key], 1)},\n"))
    errors: list[dict[str, Any]] = []
    parts.append(budget.take('  "tasks": ['))
    some = False
    for task in tasks:
        entry = _task_entry(task)
        if entry["error"] is not None:
            errors.append(entry["error"])
        parts.append(budget.take(("," if some else "") + "\n    " + _nested(entry, 2)))
        some = True
    parts.append(budget.take("\n  ],\n" if some else "],\n"))
    parts.append(budget.take(f'  "errors": {_nested(errors, 1)},\n'))
    parts.append(budget.take(f'  "result": {_nested(head["result"], 1)}\n}}\n'))
    return "".join(parts), JSON_TYPE


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _block(value: Any, language: str = "json") -> str:
    text = (
        value
        if isinstance(value, str) and language != "json"
        else json.dumps(value, indent=2, sort_keys=True)
    )
    if len(text) > MARKDOWN_VALUE_CHARS:
        text = (
            text[:MARKDOWN_VALUE_CHARS]
            + f"\n… ({len(text) - MARKDOWN_VALUE_CHARS} more characters in the JSON report)"
        )
    fence = "````" if "```" in text else "```"
    return f"{fence}{language}\n{text}\n{fence}"


def _money(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"


def render_markdown(
    run: dict[str, Any], tasks: Iterable[dict[str, Any]], limit: int | None = None
) -> tuple[str, str]:
    """The report in Markdown, made one task at a time: TooLarge once it passes ``limit``
    bytes."""
    doc = build(run, [])
    budget = _Budget(limit)
    info, summary = doc["run"], doc["summary"]
    counts = summary["tasks"]
    lines = [f"# Workflow report: {info['name'] or info['id']}", ""]
    if info["description"]:
        lines += [info["description"], ""]
    lines += [
        "## Summary",
        "",
        "| Run | State | Tasks | Succeeded | Failed | Cancelled | Cost | Time |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        f"| `{info['id']}` | **{info['state']}** | {counts['total']} | {counts['succeeded']} | {counts['failed']} "
        f"| {counts['cancelled']} | {_money(summary['total_cost'])} | {summary['total_time_s']:.3f} s |",
        "",
    ]
    if info["error"]:
        lines += [
            f"**{info['state']}:** `{info['error'].get('code', '')}`: {_cell(info['error'].get('message', ''))}",
            "",
        ]
    lines += [
        "## Stages",
        "",
        "| Stage | State | Tasks | Succeeded | Failed | Cancelled | Cost | Time | Note |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for stage in doc["stages"]:
        c = stage["tasks"]
        note = _cell((stage["error"] or {}).get("message", ""))
        lines.append(
            f"| {stage['name']} | {stage['state']} | {c['total']} | {c['succeeded']} | {c['failed']} "
            f"| {c['cancelled']} | {_money(stage['cost'])} | {stage['time_s']:.3f} s | {note} |"
        )
    lines += ["", "## Tasks", ""]
    budget.take("\n".join(lines))
    errors: list[dict[str, Any]] = []
    number = 0
    for number, task in enumerate(_entries(tasks, errors), start=1):
        first = len(lines)
        where = f"input {task['input_index']}" + (
            f", action {task['action_index']}" if task["action_index"] else ""
        )
        lines += [
            f"### {number}. {task['stage']} · {task['agent']}.{task['action']} · {where} — {task['state']}",
            "",
        ]
        facts = [
            f"task `{task['task_id']}`",
            f"{task['attempts']} attempt(s)",
            f"{task['duration_s']:.3f} s",
        ]
        if task["cost"]:
            facts.append(f"cost {_money(task['cost'])}")
        if task["model"]:
            facts.append(f"model {task['model']}")
        if task["proposed_by"]:
            facts.append(f"proposed by `{task['proposed_by']}`")
        lines += ["- " + " · ".join(facts)]
        params = json.dumps(task["params"], sort_keys=True)
        lines += [f"- params: `{params if len(params) <= 200 else params[:200] + '…'}`", ""]
        if task["error"] is not None:
            lines += [f"**Error** `{task['error']['code']}`: {task['error']['message']}", ""]
        if task["data"] is not None:
            lines += [_block(task["data"]), ""]
        budget.take("\n".join(lines[first:]) + "\n")
    if not number:
        lines += ["No task ran.", ""]
    if errors:
        lines += ["## Errors", ""]
        for error in errors:
            lines += [
                f"### {error['stage']} · {error['agent']}.{error['action']} · `{error['task_id']}`",
                "",
                f"`{error['code']}`: {error['message']}",
                "",
            ]
            if error["traceback"]:
                lines += [_block(error["traceback"], "text"), ""]
    if doc["result"] is not None:
        lines += ["## Result", ""]
        result = doc["result"]
        markdown = result.get("markdown") if isinstance(result, dict) else None
        lines += [_demote(markdown) if isinstance(markdown, str) else _block(result), ""]
    return "\n".join(lines).rstrip() + "\n", MARKDOWN_TYPE


def _entries(
    tasks: Iterable[dict[str, Any]], errors: list[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """The report entries of ``tasks``, their errors gathered into ``errors`` on the way."""
    for task in tasks:
        entry = _task_entry(task)
        if entry["error"] is not None:
            errors.append(entry["error"])
        yield entry


def _demote(markdown: str) -> str:
    """Markdown an agent rendered, its headings pushed two levels down to sit under "Result"."""
    out, fenced = [], False
    for line in markdown.rstrip().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        out.append(f"##{line}" if line.startswith("#") and not fenced else line)
    return "\n".join(out)
