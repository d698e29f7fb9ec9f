"""Run the conformance matrix without pytest: ``python -m tests.conformance [--lang L] [-k NAME]``."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .driver import ScenarioFailure, load_scenarios, run_scenario
from .languages import LANGUAGES, peer_for, prepare_all


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m tests.conformance", description=__doc__)
    p.add_argument("--lang", action="append", choices=LANGUAGES, help="only these languages")
    p.add_argument("-k", dest="match", help="only scenarios whose name contains this")
    p.add_argument("-v", "--verbose", action="store_true", help="print each failure report")
    args = p.parse_args()
    languages = tuple(args.lang or LANGUAGES)
    scenarios = [s for s in load_scenarios() if not args.match or args.match in s.name]
    with tempfile.TemporaryDirectory(prefix="ether-conformance-") as out:
        prepared = prepare_all(Path(out))
        results: dict[tuple[str, str], str] = {}
        for lang in languages:
            target = prepared[lang]
            for scenario in scenarios:
                if target.status != "ready":
                    results[scenario.name, lang] = "absent" if target.status == "absent" else "FAIL"
                    continue
                peer = peer_for(lang, prepared) if scenario.data.get("peers") else None
                try:
                    run_scenario(scenario, target, peer)
                    results[scenario.name, lang] = "PASS"
                except ScenarioFailure as exc:
                    results[scenario.name, lang] = "FAIL"
                    if args.verbose:
                        print(f"\n{exc}\n", file=sys.stderr)
        width = max((len(s.name) for s in scenarios), default=8) + 2
        print("scenario".ljust(width) + "".join(lang.ljust(12) for lang in languages))
        for scenario in scenarios:
            print(
                scenario.name.ljust(width)
                + "".join(results[scenario.name, lang].ljust(12) for lang in languages)
            )
        for lang in languages:
            if prepared[lang].status != "ready":
                print(f"{lang}: {prepared[lang].status}: {prepared[lang].detail[-1500:]}")
    return 0 if all(v != "FAIL" for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
