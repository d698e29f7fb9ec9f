"""Writes the generated vectors (vectors/out_of_order.json). Run: python tests/conformance/make_vectors.py"""

from __future__ import annotations

import json
from pathlib import Path

TASKS = 100


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


if __name__ == "__main__":
    path = Path(__file__).resolve().parent / "vectors" / "out_of_order.json"
    doc = out_of_order()
    steps = ",\n    ".join(json.dumps(s, ensure_ascii=False) for s in doc["steps"])  # type: ignore[attr-defined]
    text = f'{{\n  "description": {json.dumps(doc["description"])},\n  "steps": [\n    {steps}\n  ]\n}}\n'
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
