"""What a sandboxed agent or terminal may see: the host config's ``[sandbox]`` table, an agent's
own ``[sandbox]`` in agent.toml (which may narrow it, never widen it), and the resulting
``SandboxPolicy`` that ``Containment.wrap`` turns into bubblewrap options (containment.py).

The host config decides::

    [sandbox]
    mode = "auto"          # auto: sandbox where the machine can, warn where not
                           # required: an agent the machine cannot sandbox does not start (FATAL)
                           # off: no sandbox (PID namespace only), a warning at every start
    keep_scratch = false   # a replica's scratch is wiped at each start unless true
    read_only = []         # extra paths every agent sees read-only
    read_write = []        # extra paths every agent may write
    [sandbox.agents.NAME]  # one agent: network = "host", read_only, read_write

An agent's agent.toml may say ``[sandbox] network = "none"`` and list a subset of the
read-only / read-write paths the host gives it; asking for more is refused at deploy
(PERMISSION_DENIED, reason SANDBOX_NOT_ALLOWED, naming the setting).
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ether_host.config import ConfigError
from ether_host.errors import FieldViolation, PermissionDenied
from ether_host.reasons import Reason

MODES = ("auto", "required", "off")
NETWORKS = ("none", "host")


@dataclass(frozen=True)
class SandboxPolicy:
    """One process's sandbox: what it sees besides the system directories.

    ``read_only`` and ``read_write`` are absolute host paths bound at the same place; the
    scratch directory is writable, is the program's HOME and is named in ETHER_SCRATCH;
    ``cwd`` is where it starts (it must be visible inside)."""

    scratch: str
    cwd: str
    read_only: tuple[str, ...] = ()
    read_write: tuple[str, ...] = ()
    network: str = "none"


@dataclass(frozen=True)
class Grant:
    """What the host config allows one agent (or every agent)."""

    network: str = "none"
    read_only: tuple[str, ...] = ()
    read_write: tuple[str, ...] = ()


@dataclass(frozen=True)
class SandboxSettings:
    """The host config's ``[sandbox]`` table, checked."""

    mode: str = "auto"
    keep_scratch: bool = False
    everyone: Grant = Grant()
    agents: Mapping[str, Grant] = field(default_factory=dict)

    @classmethod
    def from_config(cls, table: Mapping[str, Any]) -> SandboxSettings:
        """Validate ``[sandbox]``; a bad key or a path that does not exist is a ConfigError."""
        allowed = {"mode", "keep_scratch", "read_only", "read_write", "agents"}
        for key in table:
            if key not in allowed:
                raise ConfigError(
                    f"sandbox: unknown key {key!r}; allowed keys are {', '.join(sorted(allowed))}"
                )
        mode = str(table.get("mode", "auto")).strip().lower()
        if mode not in MODES:
            raise ConfigError(
                f"sandbox.mode: {mode!r} is not allowed; use one of auto, required, off"
            )
        keep = table.get("keep_scratch", False)
        if not isinstance(keep, bool):
            raise ConfigError(f"sandbox.keep_scratch: expected true or false, got {keep!r}")
        everyone = _grant("sandbox", table, allow_network=False)
        per_agent = table.get("agents", {})
        if not isinstance(per_agent, Mapping):
            raise ConfigError(
                "sandbox.agents: expected a table of agent names ([sandbox.agents.NAME])"
            )
        agents = {}
        for name, entry in per_agent.items():
            if not isinstance(entry, Mapping):
                raise ConfigError(f"sandbox.agents.{name}: expected a table")
            agents[str(name)] = _grant(f"sandbox.agents.{name}", entry, allow_network=True)
        return cls(mode, keep, everyone, agents)

    def grant(self, agent: str) -> Grant:
        """What ``agent`` may have: the table for every agent plus its own."""
        own = self.agents.get(agent, Grant())
        return Grant(
            own.network,
            _unique(self.everyone.read_only + own.read_only),
            _unique(self.everyone.read_write + own.read_write),
        )

    def narrow(self, agent: str, asked: Any) -> Grant:
        """The grant an agent's ``[sandbox]`` table (agent.toml) leaves: a subset of the host's.
        Asking for more than the host allows raises PermissionDenied naming the setting."""
        allowed = self.grant(agent)
        if not asked:
            return allowed
        if not isinstance(asked, Mapping):
            raise _refused(
                "sandbox", "must be a table ([sandbox] with network, read_only, read_write)"
            )
        for key in asked:
            if key not in ("network", "read_only", "read_write"):
                raise _refused(
                    f"sandbox.{key}",
                    "only network, read_only and read_write may be set by an agent; the host "
                    "config's [sandbox] decides the rest",
                )
        network = str(asked.get("network", allowed.network))
        if network not in NETWORKS:
            raise _refused("sandbox.network", f"{network!r} is not none or host")
        if network == "host" and allowed.network != "host":
            raise _refused(
                "sandbox.network",
                f"'host' is not allowed: only the host config can give agent {agent} the "
                f'host\'s network ([sandbox.agents.{agent}] network = "host")',
            )
        lists = {}
        for key in ("read_only", "read_write"):
            granted = getattr(allowed, key)
            wanted = asked.get(key)
            if wanted is None:
                lists[key] = granted
                continue
            if not isinstance(wanted, list) or not all(isinstance(p, str) for p in wanted):
                raise _refused(f"sandbox.{key}", "expected a list of paths")
            # read_only may name a path the host lets it write (less than it may do).
            may = granted + (allowed.read_write if key == "read_only" else ())
            extra = [p for p in wanted if os.path.normpath(p) not in may]
            if extra:
                raise _refused(
                    f"sandbox.{key}",
                    f"{extra[0]} is not among the paths the host config gives agent {agent} "
                    f"([sandbox] {key} or [sandbox.agents.{agent}] {key})",
                )
            lists[key] = _unique(tuple(os.path.normpath(p) for p in wanted))
        read_write = lists["read_write"]
        read_only = tuple(p for p in lists["read_only"] if p not in read_write)
        return Grant(network, read_only, read_write)

    def scratch(self, state_dir: Path, *parts: str) -> Path:
        """A fresh (or, with keep_scratch, kept) private directory under the state directory."""
        path = state_dir.absolute().joinpath("scratch", *parts)
        if not self.keep_scratch:
            shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o700)
        return path


@functools.cache
def runtimes() -> tuple[str, ...]:
    """The installations of Python and Node on the host's PATH (and the host's own Python)
    outside the system directories -- a pyenv or nvm under the host's home: a sandboxed
    terminal that runs ``python3`` or ``node`` needs them, read-only."""
    found = [sys.prefix, sys.base_prefix]
    for program in ("python3", "python", "node"):
        path = shutil.which(program)
        if path:
            found.append(os.path.dirname(os.path.dirname(path)))
            found.append(os.path.dirname(os.path.dirname(os.path.realpath(path))))
    system = ("/usr", "/etc", "/opt")
    return _unique(
        tuple(
            os.path.normpath(p)
            for p in found
            if os.path.isdir(p) and not any(p == s or p.startswith(s + "/") for s in system)
        )
    )


def _refused(setting: str, problem: str) -> PermissionDenied:
    return PermissionDenied(
        f"agent.toml {setting}: {problem}",
        reason=Reason.SANDBOX_NOT_ALLOWED,
        violations=[FieldViolation(f"agent.toml {setting}", problem)],
        metadata={"setting": setting},
    )


def _grant(key: str, table: Mapping[str, Any], *, allow_network: bool) -> Grant:
    network = "none"
    if allow_network:
        network = str(table.get("network", "none"))
        if network not in NETWORKS:
            raise ConfigError(f"{key}.network: {network!r} is not allowed; use none or host")
        unknown = set(table) - {"network", "read_only", "read_write"}
        if unknown:
            raise ConfigError(
                f"{key}: unknown key {sorted(unknown)[0]!r}; allowed keys are network, "
                "read_only, read_write"
            )
    return Grant(network, _paths(f"{key}.read_only", table), _paths(f"{key}.read_write", table))


def _paths(key: str, table: Mapping[str, Any]) -> tuple[str, ...]:
    """Existing paths, made absolute (against the host's working directory): a path that is
    not there cannot be bound (bwrap would fail each start), so the host refuses to start
    naming it."""
    value = table.get(key.rsplit(".", 1)[1], [])
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ConfigError(f"{key}: expected a list of absolute paths, got {value!r}")
    for path in value:
        if not os.path.exists(path):
            raise ConfigError(f"{key}: {path} does not exist")
    return _unique(tuple(os.path.abspath(p) for p in value))


def _unique(paths: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(paths))
