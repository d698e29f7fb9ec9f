"""Builds each language's conformance agent once per session and prints the PASS/FAIL matrix."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from .languages import LANGUAGES, Prepared, peer_for, prepare_all

_prepared: dict[str, Prepared] | None = None
_build_dir: str | None = None
_results: dict[tuple[str, str], str] = {}


def _is_case(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return (
        callspec is not None
        and "language" in callspec.params
        and "scenario" in callspec.params
        and Path(str(item.fspath)).parent == Path(__file__).parent
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build before any test runs, so build time never counts against a test's timeout."""
    global _prepared, _build_dir
    if session.config.option.collectonly or not any(_is_case(i) for i in session.items):
        return
    _build_dir = tempfile.mkdtemp(prefix="ether-conformance-")
    _prepared = prepare_all(Path(_build_dir))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _build_dir:
        shutil.rmtree(_build_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def prepared() -> dict[str, Prepared]:
    """Every language's conformance agent, built (or absent, or failed to build)."""
    if _prepared is None:
        pytest.fail("conformance agents were not prepared (collection hook did not run)")
    return _prepared


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, Any, Any]:
    report = yield
    if _is_case(item):
        params = item.callspec.params  # type: ignore[attr-defined]
        key = (params["scenario"].name, params["language"])
        if report.skipped:
            _results[key] = "absent"
        elif report.failed:
            _results[key] = "FAIL"
        elif report.when == "call":
            _results.setdefault(key, "PASS")
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _results:
        return
    scenarios = sorted({s for s, _ in _results})
    width = max(len(s) for s in scenarios) + 2
    tr = terminalreporter
    tr.section("conformance matrix (tests/conformance)")
    tr.write_line("scenario".ljust(width) + "".join(lang.ljust(12) for lang in LANGUAGES))
    for scenario in scenarios:
        cells = "".join(_results.get((scenario, lang), "-").ljust(12) for lang in LANGUAGES)
        tr.write_line(scenario.ljust(width) + cells)
    if _prepared:
        for lang in LANGUAGES:
            prep = _prepared[lang]
            if prep.status == "absent":
                tr.write_line(f"{lang}: absent ({prep.detail})")
            elif prep.status == "build_failed":
                tr.write_line(f"{lang}: build failed: {prep.detail.strip().splitlines()[-1:]}")
            else:
                tr.write_line(f"{lang}: agent.call routed to {peer_for(lang, _prepared).language}")
