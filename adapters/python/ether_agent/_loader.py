"""Loading user code for ``python -m ether_agent``: an Agent instance or a plain callback."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from types import ModuleType

from ._agent import Agent


class LoadError(Exception):
    """The user module or its agent cannot be found."""


def import_module(module: str, path: str | None) -> ModuleType:
    """Import ``module`` (a dotted name, or a .py file path) with ``path`` first on sys.path."""
    root = os.path.abspath(path or os.getcwd())
    if root not in sys.path:
        sys.path.insert(0, root)
    if module.endswith(".py") or os.sep in module:
        file = module if os.path.isabs(module) else os.path.join(root, module)
        name = os.path.splitext(os.path.basename(file))[0]
        spec = importlib.util.spec_from_file_location(name, file)
        if spec is None or spec.loader is None:
            raise LoadError(f"cannot load {file}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(module)


def find_agent(mod: ModuleType, function: str | None) -> Agent:
    """The agent a module defines: ``function`` wrapped as a plain callback, else the module's
    ``agent`` attribute, else its only Agent instance."""
    if function:
        fn = getattr(mod, function, None)
        if fn is None or not callable(fn):
            raise LoadError(f"module {mod.__name__!r} has no function {function!r}")
        if isinstance(fn, Agent):
            return fn
        name = os.environ.get("ETHER_AGENT_NAME") or mod.__name__.rsplit(".", 1)[-1]
        return Agent.from_callable(fn, name=name)
    named = getattr(mod, "agent", None)
    if isinstance(named, Agent):
        return named
    found = [v for v in vars(mod).values() if isinstance(v, Agent)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise LoadError(
            f"module {mod.__name__!r} defines no Agent; create one (agent = Agent(...)) "
            "or name a plain callback with --function"
        )
    raise LoadError(
        f"module {mod.__name__!r} defines {len(found)} Agent instances; "
        "name the one to serve `agent`"
    )
