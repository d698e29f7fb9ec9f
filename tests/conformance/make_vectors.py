"""Writes the generated vectors: vectors/out_of_order.json, and vectors/params_rule.json from the
declaration params_rule.json. Run: python tests/conformance/make_vectors.py (test_vectors.py fails
when a generated vector is not what this writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TASKS = 100
WELCOME = {
    "type": "welcome", "protocol": 1, "host_version": "conformance-driver", "max_frame": 16777216,
    "max_in_flight": 128, "config": {}, "log_level": "info", "agent_name": "conformance",
}  # fmt: skip


def sleep_ms(i: int) -> int:
    """Varied durations, longest first, so a concurrent agent answers out of order."""
    return 20 + ((TASKS - i) * 37 % 100) * 3


def out_of_order() -> dict[str, object]:
    sends = [
        {"send": {"type": "task", "id": f"h-{i}", "action": "sleep", "params": {"ms": sleep_ms(i)}}}
        for i in range(1, TASKS + 1)
    ]
    results = [
        {"type": "result", "id": f"h-{i}", "status": "ok", "result": {"slept": sleep_ms(i)}}
        for i in range(1, TASKS + 1)
    ]
    total = sum(sleep_ms(i) for i in range(1, TASKS + 1))
    return {
        "description": (
            f"{TASKS} sleep tasks of 20-317 ms sent at once are answered in any order, matched by "
            f"id, within 8 s (run one by one they would take {total / 1000:.1f} s)."
        ),
        "steps": [*sends, {"expect": results, "unordered": True, "timeout_ms": 8000}],
    }


def params_rule_declaration() -> dict[str, Any]:
    """tests/conformance/params_rule.json: the params rule's cases, one per JSON Schema keyword."""
    declaration: dict[str, Any] = json.loads((HERE / "params_rule.json").read_text("utf-8"))
    return declaration


def checked_schema(declaration: dict[str, Any]) -> dict[str, Any]:
    """The params_schema of the conformance agents' action ``checked``: one property per case."""
    return {
        "type": "object",
        "properties": {case["property"]: case["schema"] for case in declaration["cases"]},
    }


def params_rule() -> dict[str, object]:
    declaration = params_rule_declaration()
    action = declaration["action"]
    steps: list[dict[str, Any]] = [
        {
            "expect": {
                "type": "hello",
                "actions": {
                    "$has": [
                        {"name": action, "params_schema": {"$exact": checked_schema(declaration)}}
                    ]
                },
            },
            "comment": "every language declares the same schema, the one of params_rule.json",
        },
        {"send": WELCOME},
    ]
    number = 0
    for case in declaration["cases"]:
        for kind in ("breaks", "satisfies"):
            for value in case[kind]:
                number += 1
                params = {case["property"]: value}
                refused = kind == "breaks" and case["shape"]
                result: dict[str, Any] = (
                    {"status": "error", "error": {"code": "invalid_params"}}
                    if refused
                    else {"status": "ok", "result": {"$exact": params}}
                )
                steps.append(
                    {
                        "send": {
                            "type": "task",
                            "id": f"h-{number}",
                            "action": action,
                            "params": params,
                        },
                        "comment": f"{case['keyword']} ({case['property']}): {kind}",
                    }
                )
                steps.append({"expect": {"type": "result", "id": f"h-{number}", **result}})
    return {
        "description": (
            "The params rule, adapter side: params that break the shape (type, required, through "
            "properties, items, additionalProperties) are invalid_params; params that break any "
            "other keyword reach the handler, because the host checks those before dispatch "
            "(tests/conformance/test_params_rule.py); params that satisfy every keyword reach it. "
            "Generated from params_rule.json by make_vectors.py."
        ),
        "handshake": "none",
        "steps": steps,
    }


GENERATED = {"out_of_order.json": out_of_order, "params_rule.json": params_rule}


def render(doc: dict[str, Any]) -> str:
    """A vector as written: one step per line."""
    steps = ",\n    ".join(json.dumps(s, ensure_ascii=False) for s in doc["steps"])
    head = "".join(
        f"  {json.dumps(key)}: {json.dumps(value)},\n"
        for key, value in doc.items()
        if key != "steps"
    )
    return f'{{\n{head}  "steps": [\n    {steps}\n  ]\n}}\n'


if __name__ == "__main__":
    for name, make in GENERATED.items():
        path = HERE / "vectors" / name
        path.write_text(render(make()), encoding="utf-8")
        print(f"wrote {path}")
