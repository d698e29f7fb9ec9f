"""``python -m bench`` (``make bench``): run the benchmark suites and record them in bench/RESULTS.md.

    python -m bench [--only agents|batching|ceiling|terminals|workflows|sandbox|mcp|a2a|telemetry|cluster|peers|console|scale_terminals|scale] [--quick]

Suites are modules of this package with a ``main()``: ``agents`` (always here), ``terminals`` and
``workflows`` when their modules exist. ``main`` may take ``quick: bool`` (shorter runs, for a smoke
check) and returns an exit code (None counts as 0). Each suite writes its own ``## `` section of
RESULTS.md through ``bench.report.write_section`` and leaves the others alone.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import sys
import time
import traceback

SUITES = (
    "agents",
    "batching",
    "ceiling",
    "terminals",
    "workflows",
    "sandbox",
    "mcp",
    "a2a",
    "telemetry",
    "cluster",
    "peers",
    "console",
    "scale_terminals",
    "scale",  # 500 agent processes: about 3 minutes on a loaded 2-core machine
)


def _run(name: str, quick: bool) -> int:
    module = importlib.import_module(f"bench.{name}")
    entry = module.main
    kwargs = {"quick": quick} if "quick" in inspect.signature(entry).parameters else {}
    code = entry(**kwargs)
    return int(code or 0)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=SUITES, help="run one suite")
    parser.add_argument(
        "--quick", action="store_true", help="short runs: a smoke check, not a measurement"
    )
    args = parser.parse_args()

    selected = [args.only] if args.only else list(SUITES)
    failures = []
    for name in selected:
        if importlib.util.find_spec(f"bench.{name}") is None:
            print(f"bench: no bench/{name}.py yet; skipping {name}", file=sys.stderr)
            continue
        began = time.perf_counter()
        print(f"bench: {name}", file=sys.stderr, flush=True)
        try:
            code = _run(name, args.quick)
        except Exception:
            traceback.print_exc()
            code = 1
        print(
            f"bench: {name} finished in {time.perf_counter() - began:.0f} s (exit {code})",
            file=sys.stderr,
        )
        if code:
            failures.append(name)
    if failures:
        print(f"bench: failed: {', '.join(failures)}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
