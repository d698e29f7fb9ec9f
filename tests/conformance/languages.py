"""How to build and start each language's conformance agent.

Defaults (a folder under agents/ that does not exist is reported "absent", never skipped
silently):

- python: ``python -m ether_agent --path agents/python --module agent`` (plain mode:
  ``--module plain --function run``).
- go: ``go build -o <out>/conformance .`` in agents/go (it has a go.mod); plain mode is the same
  binary with ``--plain``.
- typescript: ``npm ci`` (``npm install`` without a lockfile; skipped when node_modules is up to
  date), then ``node_modules/.bin/tsc -p tsconfig.json``; run ``node dist/agent.js`` (plain mode:
  ``node dist/plain.js``).

A folder may override its recipe with a ``conformance.json``::

    {"build": [["go", "build", "-o", "{out}/conformance", "."]],
     "agent": ["{out}/conformance"], "plain": ["{out}/conformance", "--plain"]}

``{dir}`` is the folder, ``{out}`` a fresh build folder, ``{repo}`` the repository root and
``{python}`` this interpreter. Build steps run in ``{dir}``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
AGENTS = HERE / "agents"
LANGUAGES = ("python", "go", "typescript")
BUILD_TIMEOUT_S = 600

Status = Literal["ready", "absent", "build_failed"]


@dataclasses.dataclass
class Prepared:
    """A language's conformance agent, ready to start (or why not)."""

    language: str
    status: Status
    agent: list[str] | None = None
    plain: list[str] | None = None
    cwd: str = str(REPO)
    detail: str = ""

    def command(self, kind: str) -> list[str] | None:
        return self.plain if kind == "plain" else self.agent


def _fill(argv: list[str], values: dict[str, str]) -> list[str]:
    return [arg.format(**values) for arg in argv]


def _run_steps(steps: list[list[str]], cwd: Path, log: list[str]) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "NODE_ENV"}
    env.setdefault("GOTOOLCHAIN", "local")
    for argv in steps:
        log.append("$ " + " ".join(argv))
        try:
            proc = subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.append(f"failed to run: {exc}")
            return False
        log.append((proc.stdout + proc.stderr).strip())
        if proc.returncode != 0:
            log.append(f"exit status {proc.returncode}")
            return False
    return True


def _npm_up_to_date(folder: Path) -> bool:
    stamp = folder / "node_modules" / ".package-lock.json"
    if not stamp.exists():
        return False
    newest = max(
        (folder / n).stat().st_mtime
        for n in ("package.json", "package-lock.json")
        if (folder / n).exists()
    )
    return stamp.stat().st_mtime >= newest


def _default_recipe(language: str, folder: Path) -> dict[str, Any] | str:
    """The built-in recipe, or a string saying why the folder cannot be built."""
    if language == "python":
        base = ["{python}", "-m", "ether_agent", "--path", "{dir}"]
        return {
            "build": [],
            "agent": [*base, "--module", "agent"],
            "plain": [*base, "--module", "plain", "--function", "run"],
        }
    if language == "go":
        if not (folder / "go.mod").exists():
            return "agents/go has no go.mod (and no conformance.json)"
        return {
            "build": [["go", "build", "-o", "{out}/conformance", "."]],
            "agent": ["{out}/conformance"],
            "plain": ["{out}/conformance", "--plain"],
        }
    if not (folder / "package.json").exists():
        return "agents/typescript has no package.json (and no conformance.json)"
    build: list[list[str]] = []
    if not _npm_up_to_date(folder):
        lock = (folder / "package-lock.json").exists()
        build.append(
            ["npm", "ci" if lock else "install", "--no-audit", "--no-fund", "--loglevel=error"]
        )
    build.append(["{dir}/node_modules/.bin/tsc", "-p", "tsconfig.json"])
    return {
        "build": build,
        "agent": ["node", "{dir}/dist/agent.js"],
        "plain": ["node", "{dir}/dist/plain.js"],
    }


def prepare(language: str, out_root: Path) -> Prepared:
    """Build ``language``'s conformance agent into a folder under ``out_root``."""
    folder = AGENTS / language
    if not folder.is_dir():
        return Prepared(
            language, "absent", detail=f"tests/conformance/agents/{language} does not exist yet"
        )
    manifest = folder / "conformance.json"
    if manifest.exists():
        try:
            recipe: dict[str, Any] | str = json.loads(manifest.read_text())
        except ValueError as exc:
            return Prepared(language, "build_failed", detail=f"{manifest}: {exc}")
        if not _valid_recipe(recipe):
            return Prepared(
                language,
                "build_failed",
                detail=f"{manifest}: expected {{build: [[argv...]...], agent: [argv...], "
                "plain: [argv...]}} (see tests/conformance/README.md)",
            )
    else:
        recipe = _default_recipe(language, folder)
    if isinstance(recipe, str):
        return Prepared(language, "build_failed", detail=recipe)
    out = out_root / language
    out.mkdir(parents=True, exist_ok=True)
    values = {"dir": str(folder), "out": str(out), "repo": str(REPO), "python": sys.executable}
    log: list[str] = []
    steps = [_fill(step, values) for step in recipe.get("build", [])]
    if not _run_steps(steps, folder, log):
        return Prepared(language, "build_failed", detail="\n".join(log)[-6000:])
    agent, plain = recipe.get("agent"), recipe.get("plain")
    return Prepared(
        language,
        "ready",
        agent=_fill(agent, values) if agent else None,
        plain=_fill(plain, values) if plain else None,
        cwd=str(folder),
        detail="\n".join(log)[-2000:],
    )


def _valid_recipe(recipe: Any) -> bool:
    def argv(value: Any) -> bool:
        return isinstance(value, list) and bool(value) and all(isinstance(a, str) for a in value)

    return (
        isinstance(recipe, dict)
        and argv(recipe.get("agent"))
        and (recipe.get("plain") is None or argv(recipe["plain"]))
        and isinstance(recipe.get("build", []), list)
        and all(argv(step) for step in recipe.get("build", []))
    )


def prepare_all(out_root: Path, languages: tuple[str, ...] = LANGUAGES) -> dict[str, Prepared]:
    """Build every language in parallel."""
    with ThreadPoolExecutor(len(languages)) as pool:
        results = pool.map(lambda lang: prepare(lang, out_root), languages)
        return dict(zip(languages, results, strict=True))


def peer_for(language: str, prepared: dict[str, Prepared]) -> Prepared:
    """The agent that serves ``language``'s agent.call: the next ready language in the ring
    python -> go -> typescript -> python, else the same language."""
    start = LANGUAGES.index(language)
    for step in range(1, len(LANGUAGES)):
        other = prepared.get(LANGUAGES[(start + step) % len(LANGUAGES)])
        if other is not None and other.status == "ready":
            return other
    return prepared[language]
