"""``python -m ether_agent --module M [--function F] [--path DIR]``: serve user code.

Without ``--function`` the module must define an ``Agent`` (the attribute ``agent``, or its
only Agent instance). With it, ``F(payload) -> result`` (sync or async, no SDK import needed,
the seeds' style) is served as a single action named F with an any-object schema.
"""

from __future__ import annotations

import sys
import traceback
from types import SimpleNamespace
from typing import TYPE_CHECKING

from ._hostlife import EXIT_FATAL
from ._io import diag

if TYPE_CHECKING:
    import argparse

# How the host starts every agent: ``--path DIR --module M [--function F]``. argparse, with the
# gettext it loads, held 0.6 MiB of each idle agent's private memory (bench/scale.py's USS, 13.2
# MiB before) to read that, so such a command line is read here; any other (--help, --describe,
# a --opt=value, a mistake) goes to argparse, which answers it as before.
_OPTIONS = {
    "--module": "module",
    "-m": "module",
    "--function": "function",
    "-f": "function",
    "--path": "path",
}


def _plain_options(argv: list[str]) -> SimpleNamespace | None:
    """The options of a command line of pairs from _OPTIONS naming a module; else None."""
    found: dict[str, str | bool | None] = dict.fromkeys(("module", "function", "path"))
    found["describe"] = False
    pairs = iter(argv)
    for option in pairs:
        dest = _OPTIONS.get(option)
        value = next(pairs, None)
        if dest is None or value is None or value.startswith("-"):
            return None
        found[dest] = value
    return SimpleNamespace(**found) if found["module"] else None


def _parser() -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(prog="python -m ether_agent", description=__doc__.split("\n")[0])
    p.add_argument("--module", "-m", required=True, help="module name or .py file to load")
    p.add_argument("--function", "-f", help="serve this plain callback F(payload) -> result")
    p.add_argument("--path", help="folder put first on sys.path (default: the working dir)")
    p.add_argument(
        "--describe",
        action="store_true",
        help="print the agent's actions and schemas as JSON and exit (no host needed)",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    args = _plain_options(argv) or _parser().parse_args(argv)
    from ._loader import LoadError, find_agent, import_module

    if args.describe:
        import json

        agent = find_agent(import_module(args.module, args.path), args.function)
        json.dump({"name": agent.name, "actions": agent.hello_actions()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return

    from ._boot import boot, fatal
    from ._runtime import serve

    state = boot()  # cookie, host watch, fd hygiene, version: all before user code loads
    try:
        agent = find_agent(import_module(args.module, args.path), args.function)
    except LoadError as exc:
        fatal(state.channel, "agent_load_failed", str(exc))
    except Exception as exc:
        traceback.print_exc()
        fatal(state.channel, "agent_load_failed", f"loading {args.module!r} failed: {exc!r}")
    except SystemExit as exc:
        diag(f"user module exited while loading ({exc.code}); not serving")
        raise SystemExit(EXIT_FATAL if exc.code else 0) from None
    serve(agent, state)


if __name__ == "__main__":
    main()
