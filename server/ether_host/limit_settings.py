"""What the host config's ``[limits]`` table and an agent.toml's ``[limits]`` say: sizes and
counts checked and put in words, the host's defaults, and the rule that an agent may only lower
the host's limits. resources.py enforces them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ether_host.config import ConfigError
from ether_host.errors import FailedPrecondition, FieldViolation, InvalidArgument
from ether_host.memory_total import parse_total
from ether_host.reasons import Reason

MECHANISMS = ("auto", "rlimit")

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1000,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1000**2,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1000**3,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1000**4,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


@dataclass(frozen=True)
class Limits:
    """Limits of one child; 0 is no limit. Sizes in bytes, CPU time in seconds, CPU weight
    1-10000 relative to the host's 100."""

    memory: int = 0
    pids: int = 0
    open_files: int = 0
    file_size: int = 0
    cpu_time: int = 0
    cpu_weight: int = 0

    def describe(self) -> dict[str, str]:
        """Each limit in words ("1 GiB", "512", "unlimited")."""
        return {name: _words(name, getattr(self, name)) for name in _KEYS}


AGENT_DEFAULTS = Limits(memory=1 << 30, pids=512, open_files=4096)
# A terminal's programs share one cpu group of the host's own weight: without one each process
# weighs as much as the host's event loop, and with 100 terminals printing at once the loop got
# ~10 % of its time on a CPU and ReadScreen waited seconds (bench/RESULTS.md, "Terminals at
# scale"; `cpu_weight = "unlimited"` in [limits.terminals] gives that back).
TERMINAL_DEFAULTS = Limits(memory=2 << 30, pids=1024, open_files=4096, cpu_weight=100)


def _words(name: str, value: int) -> str:
    if value == 0:
        return "unlimited"
    if name in ("memory", "file_size"):
        return human_size(value)
    if name == "cpu_time":
        return f"{value} s"
    return str(value)


def human_size(size: int) -> str:
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


def _size(value: Any) -> int:
    """Bytes from a whole number or a string with a unit ("64MiB", "1 GiB", "512k");
    "unlimited" and 0 are no limit. ValueError says what is wrong."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        number = value
    else:
        text = str(value).strip().lower()
        if text in ("unlimited", "none", "max"):
            return 0
        if text.startswith("-"):
            raise ValueError(f"{value!r} is negative")
        match = _SIZE.match(text)
        if match is None or match.group(2) not in _UNITS:
            raise ValueError(f"{value!r} is not a size (use bytes or 64MiB, 1GiB, ...)")
        number = int(float(match.group(1)) * _UNITS[match.group(2)])
    if number < 0:
        raise ValueError(f"{value!r} is negative")
    return number


def _whole(highest: int) -> Any:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a whole number")
        text = str(value).strip().lower()
        if text in ("unlimited", "none", "max"):
            return 0
        try:
            number = int(text)
        except ValueError:
            raise ValueError(f"{value!r} is not a whole number") from None
        if number < 0:
            raise ValueError(f"{value!r} is negative")
        if number > highest:
            raise ValueError(f"{number} is more than {highest}")
        return number

    return parse


_KEYS = {
    "memory": _size,
    "pids": _whole(4_194_304),
    "open_files": _whole(1 << 30),
    "file_size": _size,
    "cpu_time": _whole(1 << 31),
    "cpu_weight": _whole(10_000),
}


def parse_limits(table: Any, where: str) -> dict[str, int]:
    """The limits a table sets, by name; ValueError naming ``where.<key>`` when one is bad."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: expected a table, got {table!r}")
    found = {}
    for key, raw in table.items():
        parse = _KEYS.get(key)
        if parse is None:
            raise ValueError(f"{where}: unknown key {key!r}; allowed keys are {', '.join(_KEYS)}")
        try:
            found[key] = parse(raw)
        except ValueError as error:
            raise ValueError(f"{where}.{key}: {error}") from None
    return found


@dataclass(frozen=True)
class LimitSettings:
    """The host config's ``[limits]`` table."""

    mechanism: str = "auto"  # "rlimit": never cgroups (also to test the fallback)
    agents: Limits = AGENT_DEFAULTS
    terminals: Limits = TERMINAL_DEFAULTS
    # All agents and terminals together (memory_total.py): None is the default (a share of
    # the machine's memory, found at start), 0 is off.
    total_memory: int | None = None

    @classmethod
    def from_config(cls, table: Mapping[str, Any]) -> LimitSettings:
        """Validate the ``[limits]`` table; ConfigError naming the bad key."""
        settings = cls()
        for key, raw in table.items():
            if key == "mechanism":
                text = str(raw).strip().lower()
                if text not in MECHANISMS:
                    raise ConfigError(
                        f"limits.mechanism: {raw!r} is not allowed; use one of "
                        f"{', '.join(MECHANISMS)}"
                    )
                settings = replace(settings, mechanism=text)
            elif key in ("agents", "terminals"):
                try:
                    values = parse_limits(raw, f"limits.{key}")
                except ValueError as error:
                    raise ConfigError(str(error)) from None
                settings = replace(settings, **{key: replace(getattr(settings, key), **values)})
            elif key == "total_memory":
                try:
                    settings = replace(settings, total_memory=parse_total(raw, _size))
                except ValueError as error:
                    raise ConfigError(
                        f'limits.total_memory: {error} (a size, "auto" or "off")'
                    ) from None
            else:
                raise ConfigError(
                    "limits: unknown key "
                    f"{key!r}; allowed keys are agents, mechanism, terminals, total_memory"
                )
        total, replica = settings.total_memory, settings.agents.memory
        if total and replica and total < replica:
            raise ConfigError(
                f"limits.total_memory: {human_size(total)} is less than one agent replica may "
                f"use (limits.agents.memory = {_words('memory', replica)}); raise it or lower "
                "limits.agents.memory"
            )
        return settings


def agent_limits(table: Any) -> dict[str, int]:
    """An agent.toml ``[limits]`` table, checked; INVALID_ARGUMENT naming a bad key."""
    try:
        return parse_limits(table, "agent.toml limits")
    except ValueError as error:
        name, _, problem = str(error).partition(": ")
        raise InvalidArgument(
            str(error), reason=Reason.INVALID_AGENT_SPEC, violations=[FieldViolation(name, problem)]
        ) from None


def narrow(host: Limits, asked: Mapping[str, int]) -> Limits:
    """``host`` lowered by what an agent asked; FAILED_PRECONDITION naming a limit it asked
    to raise (no limit when the host has one counts as raising it)."""
    for key, value in asked.items():
        allowed = getattr(host, key)
        if allowed and (value == 0 or value > allowed):
            raise FailedPrecondition(
                f"agent.toml limits.{key}: {_words(key, value)} is more than the host allows "
                f"({_words(key, allowed)}, set by limits.agents.{key} in the host config); "
                "an agent may only lower the host's limits",
                reason=Reason.LIMIT_ABOVE_HOST,
                metadata={"setting": f"limits.{key}", "allowed": str(allowed)},
            )
    return replace(host, **asked)


__all__ = [
    "AGENT_DEFAULTS",
    "MECHANISMS",
    "TERMINAL_DEFAULTS",
    "LimitSettings",
    "Limits",
    "agent_limits",
    "human_size",
    "narrow",
    "parse_limits",
]
