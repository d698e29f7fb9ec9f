"""The machine facts a reader needs to compare figures, and the sections of bench/RESULTS.md."""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.common import REPO

RESULTS = REPO / "bench" / "RESULTS.md"


def _version(argv: list[str]) -> str:
    try:
        return (
            subprocess.run(argv, capture_output=True, text=True, timeout=10)
            .stdout.strip()
            .splitlines()[0]
        )
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "not installed"


def machine_facts() -> dict[str, str]:
    """The facts a reader needs to compare numbers: CPU, kernel, memory, interpreters, libraries, commit."""
    from importlib.metadata import PackageNotFoundError, version

    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    memory = re.search(r"^MemTotal:\s*(\d+)", Path("/proc/meminfo").read_text(), re.M)

    def package(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "-"

    head = _version(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "server", "adapters"],
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout.strip()
    return {
        "date": datetime.date.today().isoformat(),
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": model.group(1).strip() if model else platform.processor(),
        "kernel": f"{platform.system()} {platform.release()}",
        "memory": f"{int(memory.group(1)) // 1024} MiB" if memory else "?",
        "python": platform.python_version(),
        "packages": ", ".join(
            f"{n} {package(n)}" for n in ("grpcio", "protobuf", "uvloop", "orjson", "mcp")
        ),
        "go": _version(["go", "version"]).removeprefix("go version "),
        "node": _version(["node", "--version"]),
        "commit": head + (" + uncommitted changes in server/ or adapters/" if dirty else ""),
    }


def machine_markdown(facts: dict[str, str] | None = None) -> str:
    facts = facts or machine_facts()
    return markdown_table(["fact", "value"], [[k, v] for k, v in facts.items()])


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


RESULTS_PREAMBLE = """# Benchmark results

Written by `make bench` (`python -m bench`); each suite replaces only its own `## ` section.
Every target is a ratio of two figures measured side by side in the same run on the same machine
(see `../shared/research/perf-baselines.md` for why absolute latencies on this VM are not comparable
across runs).
"""


def write_section(title: str, body: str, path: Path = RESULTS) -> None:
    """Replace the section headed ``## <title>`` (up to the next ``## `` heading) or append it.

    Every other section of the file is kept as it is.
    """
    text = path.read_text() if path.exists() else RESULTS_PREAMBLE
    lines = text.splitlines()
    heading = f"## {title}"
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    block = [heading, "", *body.strip("\n").splitlines(), ""]
    if start is None:
        while lines and not lines[-1].strip():
            lines.pop()
        lines += ["", *block]
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
        )
        lines[start:end] = block
    path.write_text("\n".join(lines).rstrip("\n") + "\n")


def fmt(value: float | None, digits: int = 0) -> str:
    """A number for a table: thousands separators, '-' for missing or NaN."""
    if value is None or value != value:
        return "-"
    return f"{value:,.{digits}f}"
