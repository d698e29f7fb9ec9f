"""scout: explore a directory tree, analyze files, search content, summarize findings.

Everything here is deterministic and local: it reads the files it is pointed
at and nothing else.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ether_agent import Agent, AgentError, TaskContext

agent = Agent(
    "scout",
    version="1.0.0",
    description="Explores directories, analyzes files, searches content and summarizes findings.",
    tags=["filesystem", "code-analysis"],
    max_concurrency=8,
)

SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "dist", ".mypy_cache", ".ruff_cache"}
LANGUAGES = {
    ".py": "python",
    ".go": "go",
    ".ts": "typescript",
    ".js": "javascript",
    ".md": "markdown",
    ".proto": "protobuf",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".sh": "shell",
    ".c": "c",
    ".h": "c",
    ".rs": "rust",
    ".txt": "text",
}
DEFINITION = re.compile(
    r"^\s*(def |async def |class |func |function |export function |export class )"
)


def _folder(path: str) -> Path:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise AgentError("not_found", f"{_shown(path, folder)} is not a directory")
    return folder


def _shown(path: str, resolved: Path) -> str:
    """The path as given, and where a relative one led: the agent runs in its own folder."""
    if resolved.is_absolute():
        return path
    return f"{path} ({resolved.absolute()}: a relative path is read from the agent's folder)"


def _walk(root: Path, max_depth: int, include_hidden: bool) -> list[Path]:
    files: list[Path] = []
    for current, dirs, names in os.walk(root):
        depth = len(Path(current).relative_to(root).parts)
        dirs[:] = sorted(
            d for d in dirs if d not in SKIP_DIRS and (include_hidden or not d.startswith("."))
        )
        if depth >= max_depth:
            dirs[:] = []
        files.extend(
            Path(current) / n for n in sorted(names) if include_hidden or not n.startswith(".")
        )
    return files


def _text(path: Path) -> str | None:
    data = path.read_bytes()[: 4 * 1024 * 1024]
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


@agent.action(
    description="List the files under a directory with sizes, languages and totals.",
    idempotent=True,
)
def explore_directory(
    path: str, max_depth: int = 4, include_hidden: bool = False
) -> dict[str, Any]:
    root = _folder(path)
    files = _walk(root, max_depth, include_hidden)
    by_language: Counter[str] = Counter()
    entries = []
    for file in files:
        size = file.stat().st_size
        language = LANGUAGES.get(file.suffix.lower(), "other")
        by_language[language] += 1
        entries.append({"path": str(file.relative_to(root)), "size": size, "language": language})
    return {
        "path": str(root),
        "files": entries,
        "total_files": len(entries),
        "total_bytes": sum(e["size"] for e in entries),
        "by_language": dict(sorted(by_language.items())),
    }


@agent.action(
    description="Count lines, words, definitions, TODOs and imports of one text file.",
    idempotent=True,
)
def analyze_file(path: str) -> dict[str, Any]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise AgentError("not_found", f"{_shown(path, file)} is not a file")
    text = _text(file)
    if text is None:
        return {"path": str(file), "binary": True, "bytes": file.stat().st_size}
    lines = text.splitlines()
    return {
        "path": str(file),
        "binary": False,
        "language": LANGUAGES.get(file.suffix.lower(), "other"),
        "lines": len(lines),
        "blank_lines": sum(1 for line in lines if not line.strip()),
        "words": len(text.split()),
        "chars": len(text),
        "longest_line": max((len(line) for line in lines), default=0),
        "definitions": sum(1 for line in lines if DEFINITION.match(line)),
        "todos": sum(1 for line in lines if re.search(r"\b(TODO|FIXME|XXX)\b", line)),
        "imports": sum(
            1 for line in lines if re.match(r"^\s*(import |from \S+ import |#include )", line)
        ),
    }


@agent.action(
    description="Search the files under a directory for a regular expression.", idempotent=True
)
def search_content(
    path: str, pattern: str, max_results: int = 100, glob: str = "*", ctx: TaskContext | None = None
) -> dict[str, Any]:
    root = _folder(path)
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise AgentError(
            "invalid_params", f"pattern does not compile at position {error.pos}: {error.msg}"
        ) from None
    matches: list[dict[str, Any]] = []
    files = [f for f in _walk(root, 32, False) if f.match(glob)]
    for index, file in enumerate(files):
        if ctx is not None and index % 50 == 0:
            ctx.progress(index, len(files), f"searching {file.name}")
        text = _text(file)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                matches.append(
                    {
                        "file": str(file.relative_to(root)),
                        "line": number,
                        "text": line.strip()[:200],
                    }
                )
                if len(matches) >= max_results:
                    return {"matches": matches, "count": len(matches), "truncated": True}
    return {"matches": matches, "count": len(matches), "truncated": False}


@agent.action(
    description="Summarize a list of findings (outputs of the other actions) into counts and text."
)
def summarize_findings(findings: list[dict[str, Any]]) -> dict[str, Any]:
    files = sum(int(f.get("total_files", 0)) for f in findings)
    lines = sum(int(f.get("lines", 0)) for f in findings)
    todos = sum(int(f.get("todos", 0)) for f in findings)
    matches = sum(int(f.get("count", 0)) for f in findings)
    languages: Counter[str] = Counter()
    for finding in findings:
        languages.update(finding.get("by_language", {}))
        if "language" in finding:
            languages[finding["language"]] += 1
    parts = [f"{len(findings)} findings"]
    if files:
        parts.append(f"{files} files explored")
    if lines:
        parts.append(f"{lines} lines analyzed")
    if todos:
        parts.append(f"{todos} TODO markers")
    if matches:
        parts.append(f"{matches} search matches")
    return {
        "summary": ", ".join(parts) + ".",
        "findings": len(findings),
        "files": files,
        "lines": lines,
        "todos": todos,
        "matches": matches,
        "languages": dict(languages.most_common()),
    }


@agent.action(
    description="Survey a directory across languages: wordcount (Go) counts its words, "
    "report (TypeScript) renders the findings as Markdown."
)
async def survey(path: str, ctx: TaskContext) -> dict[str, Any]:
    root = _folder(path)
    explored = explore_directory(str(root), max_depth=3)
    ctx.progress(1, 3, "counting words with the Go agent")
    counted = await ctx.call_agent("wordcount", "count", {"paths": [str(root)], "top": 5})
    if counted.get("status") != "SUCCESS":
        raise AgentError("dependency_failed", f"wordcount failed: {counted.get('error')}")
    counts = counted["data"]
    findings = [
        {
            "title": f"{explored['total_files']} files in {root.name}",
            "severity": "info",
            "detail": ", ".join(f"{lang}: {n}" for lang, n in explored["by_language"].items()),
        },
        {
            "title": f"{counts.get('words', 0)} words in {counts.get('lines', 0)} lines",
            "severity": "info",
            "detail": "Top terms: " + ", ".join(t["term"] for t in counts.get("top_terms", [])),
        },
    ]
    ctx.progress(2, 3, "rendering with the TypeScript agent")
    rendered = await ctx.call_agent(
        "report", "render", {"title": f"Survey of {root.name}", "findings": findings}
    )
    if rendered.get("status") != "SUCCESS":
        raise AgentError("dependency_failed", f"report failed: {rendered.get('error')}")
    return {
        "markdown": rendered["data"]["markdown"],
        "files": explored["total_files"],
        "words": counts.get("words"),
    }
