"""The suite's own checks: every vector is well formed, and the pattern operators mean what
README.md says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .driver import load_scenarios
from .make_vectors import GENERATED, render
from .matching import match

TOP_KEYS = {
    "name", "description", "agent", "env", "handshake", "welcome", "ignore", "peers", "host",
    "timeout_ms", "steps",
}  # fmt: skip
STEP_KEYS = {
    "send", "send_raw", "send_line", "expect", "expect_stderr", "route_call", "close_stdin",
    "signal", "mark", "expect_exit", "barrier", "kill_host", "expect_gone",
}  # fmt: skip
STEP_OPTIONS = {"comment", "timeout_ms", "unordered", "capture", "within_ms", "since"}
PLACEHOLDERS = {
    "$any",
    "$absent",
    "$string",
    "$number",
    "$int",
    "$bool",
    "$object",
    "$array",
    "$null",
}
OPERATORS = {
    "$exact", "$oneOf", "$has", "$contains", "$re", "$between", "$len", "$repeat", "$capture",
    "$var", "$literal",
}  # fmt: skip


def _operators_ok(value: Any) -> list[str]:
    if isinstance(value, str) and value.startswith("$"):
        return [] if value in PLACEHOLDERS else [value]
    if isinstance(value, list):
        return [bad for item in value for bad in _operators_ok(item)]
    if isinstance(value, dict):
        ops = [k for k in value if k.startswith("$")]
        bad = [k for k in ops if k not in OPERATORS]
        if "$literal" in value:
            return bad
        return bad + [b for v in value.values() for b in _operators_ok(v)]
    return []


@pytest.mark.parametrize("scenario", load_scenarios(), ids=lambda s: s.name)
def test_every_vector_is_well_formed(scenario: Any) -> None:
    """Known top-level fields, one action per step, known options and operators only."""
    data = scenario.data
    assert scenario.description, "a vector says what it proves"
    assert set(data) <= TOP_KEYS, set(data) - TOP_KEYS
    assert data.get("agent", "conformance") in ("conformance", "plain")
    assert data.get("handshake", "auto") in ("auto", "none")
    assert data.get("host", "direct") in ("direct", "relay")
    assert data["steps"], "a vector has steps"
    for number, step in enumerate(data["steps"], start=1):
        actions = set(step) & STEP_KEYS
        assert len(actions) == 1, f"step {number} needs exactly one action: {step}"
        assert set(step) - STEP_KEYS <= STEP_OPTIONS, f"step {number}: {set(step) - STEP_KEYS}"
        assert _operators_ok(step) == [], f"step {number}: unknown operators"


def test_patterns_match_subsets_types_and_operators() -> None:
    """Objects are subsets, numbers compare by value, booleans only with booleans."""
    frame = {"type": "result", "id": "h-1", "result": {"n": 1, "ok": True, "s": "héllo"}}
    assert match({"type": "result", "result": {"n": 1.0}}, frame, {}) == []
    assert match({"result": {"ok": 1}}, frame, {}) != []
    assert match({"result": {"$exact": {"n": 1}}}, frame, {}) != []
    assert match({"id": {"$re": "^h-"}, "missing": "$absent"}, frame, {}) == []
    assert match({"result": {"s": {"$contains": "él"}, "n": "$int"}}, frame, {}) == []
    assert match({"result": {"n": {"$oneOf": [2, 1]}}}, frame, {}) == []
    assert match({"x": {"$repeat": "ab", "count": 2}}, {"x": "abab"}, {}) == []
    assert match([1, 2], [1, 2, 3], {}) != []
    assert match({"$has": [2, {"a": 1}]}, [{"a": 1, "b": 2}, 2], {}) == []


def test_capture_binds_and_var_compares() -> None:
    """$capture binds a value that $var later requires."""
    bindings: dict[str, Any] = {}
    assert match({"id": {"$capture": "cid"}}, {"id": "a-7"}, bindings) == []
    assert bindings["cid"] == "a-7"
    assert match({"id": {"$var": "cid"}}, {"id": "a-7"}, bindings) == []
    assert match({"id": {"$var": "cid"}}, {"id": "a-8"}, bindings) != []


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_vectors_are_what_make_vectors_writes(name: str) -> None:
    """A generated vector is never edited by hand: rerun make_vectors.py after changing its source."""
    written = (Path(__file__).parent / "vectors" / name).read_text("utf-8")
    assert written == render(GENERATED[name]()), (
        f"run python tests/conformance/make_vectors.py ({name})"
    )
