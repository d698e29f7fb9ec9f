"""concierge: answer a user's question about a folder or file by asking the scout agent.

    What is in examples/agents/scout?      -> scout.explore_directory + summarize_findings
    Tell me about README.md                -> scout.analyze_file
    Find TODO in server                    -> scout.search_content

Every answer is also written to the session's context under ``findings.<path>`` (with
``last_question`` and ``questions``), and announced with a ``findings_ready`` event. Paths are
relative to the repository root (deployment config ``root`` to change it) and never leave it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ether_agent import Agent, AgentError, TaskContext
from ether_agent.gateway import CTX_CALLS, session

agent = Agent(
    "concierge",
    kind="io_gateway",
    version="1.0.0",
    description="Answers questions about the files of this repository, using the scout agent.",
    tags=["concierge", "filesystem-help"],
    max_concurrency=8,
    calls=["agent.call", *CTX_CALLS],
)

SEARCH = re.compile(
    r"\b(?:find|search(?: for)?|grep)\s+(?P<pattern>.+?)\s+in\s+(?P<path>\S+)", re.IGNORECASE
)
HELP = (
    "Ask me about a folder or a file of this repository, for example "
    "'What is in examples/agents/scout?', 'Tell me about README.md' or 'Find TODO in server'."
)


def _root(ctx: TaskContext) -> Path:
    configured = ctx.config.get("root")
    return Path(configured).resolve() if configured else Path(__file__).resolve().parents[3]


def _inside(root: Path, word: str) -> Path | None:
    """``word`` as a path under ``root`` that exists, or None (never outside the root)."""
    cleaned = word.strip("'\"`?!.,;:()")
    if not cleaned:
        return None
    candidate = (root / cleaned).resolve()
    if candidate != root and root not in candidate.parents:
        return None
    return candidate if candidate.exists() else None


async def _scout(ctx: TaskContext, action: str, params: dict[str, Any]) -> dict[str, Any]:
    output = await ctx.call_agent("scout", action, params)
    if output.get("status") != "SUCCESS":
        error = output.get("error") or {}
        raise AgentError(
            "scout_failed", f"scout.{action}: {error.get('message') or output.get('status')}"
        )
    data = output.get("data")
    return data if isinstance(data, dict) else {}


@agent.action(description="Answer one user message about the repository's files.")
async def respond(message: dict[str, Any], turn: int, ctx: TaskContext) -> dict[str, Any]:
    text = str(message.get("text") or "").strip()
    root = _root(ctx)
    search = SEARCH.search(text)
    if search:
        target = _inside(root, search["path"])
        if target is None or not target.is_dir():
            return {"text": f"I cannot find a folder {search['path']!r} in this repository. {HELP}"}
        wanted = search["pattern"].strip("'\"")
        pattern = re.escape(wanted)
        ctx.progress(1, 2, f"searching {target.relative_to(root)}")
        found = await _scout(
            ctx, "search_content", {"path": str(target), "pattern": pattern, "max_results": 20}
        )
        where = sorted({m["file"] for m in found.get("matches", [])})
        count = int(found.get("count", 0))
        answer = (
            f"{_count(count, 'line')} in {target.relative_to(root)} "
            f"match{'es' if count == 1 else ''} '{wanted}'"
            + (f" (files: {', '.join(where[:5])})" if where else "")
            + "."
        )
        return await _remember(
            ctx, turn, text, str(target.relative_to(root)), {"search": found}, answer
        )
    target = next(
        (p for p in (_inside(root, w) for w in text.split()) if p is not None and p != root), None
    )
    if target is None:
        return {"text": HELP}
    relative = str(target.relative_to(root))
    if target.is_dir():
        ctx.progress(1, 2, f"exploring {relative}")
        explored = await _scout(ctx, "explore_directory", {"path": str(target), "max_depth": 3})
        summary = await _scout(ctx, "summarize_findings", {"findings": [explored]})
        languages = ", ".join(f"{n} {lang}" for lang, n in explored.get("by_language", {}).items())
        names = ", ".join(f["path"] for f in explored.get("files", [])[:8])
        answer = (
            f"{relative} holds {_count(explored.get('total_files', 0), 'file')} "
            f"({_count(explored.get('total_bytes', 0), 'byte')}; {languages}): {names}."
        )
        compact = {
            "kind": "directory",
            "files": explored.get("total_files"),
            "bytes": explored.get("total_bytes"),
            "by_language": explored.get("by_language"),
            "summary": summary.get("summary"),
        }
        return await _remember(ctx, turn, text, relative, compact, answer)
    ctx.progress(1, 2, f"analyzing {relative}")
    analyzed = await _scout(ctx, "analyze_file", {"path": str(target)})
    if analyzed.get("binary"):
        answer = f"{relative} is a binary file of {_count(analyzed.get('bytes', 0), 'byte')}."
    else:
        answer = (
            f"{relative} is a {analyzed.get('language', 'text')} file of "
            f"{_count(analyzed.get('lines', 0), 'line')} ({_count(analyzed.get('definitions', 0), 'definition')}, "
            f"{_count(analyzed.get('imports', 0), 'import')}, {_count(analyzed.get('todos', 0), 'TODO marker')})."
        )
    analyzed.pop("path", None)
    return await _remember(ctx, turn, text, relative, {"kind": "file", **analyzed}, answer)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


async def _remember(
    ctx: TaskContext, turn: int, question: str, path: str, finding: dict[str, Any], answer: str
) -> dict[str, Any]:
    """Write the finding to the session's context, announce it, and make it the reply."""
    board = session(ctx)
    current = await board.get("questions")
    questions = int(current.context.get("questions") or 0) + 1
    version = await board.patch(
        {"findings": {path: finding}, "last_question": question, "questions": questions}
    )
    ctx.progress(2, 2, "done")
    await board.emit("findings_ready", {"path": path, "turn": turn, "context_version": version})
    return {"text": answer, "path": path, "finding": finding}


if __name__ == "__main__":
    agent.run()
