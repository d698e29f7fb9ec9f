"""The ``[terminals]`` table of the host config: limits, defaults and the command policy.

Every key is declared once in ``_KEYS`` with its parser, so an unknown key or
a bad value fails the host's start with one line naming the key.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ether_host.config import ConfigError

# Variables a terminal inherits from the host's environment (when set there).
DEFAULT_ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
)
MAX_SIZE = 1000


@dataclass(frozen=True)
class TerminalSettings:
    """Limits and defaults of the terminal service. Times are in seconds, sizes in bytes."""

    max_terminals: int = 64
    max_terminals_per_owner: int = 16
    idle_timeout: float = 1800.0
    idle_timeout_limit: float = 7 * 86400.0
    lifetime: float = 86400.0
    lifetime_limit: float = 30 * 86400.0
    scrollback_lines: int = 1000
    scrollback_limit: int = 100_000
    output_buffer: int = 2 * 1024 * 1024
    input_queue: int = 16 * 1024 * 1024
    attach_lag: int = 2 * 1024 * 1024
    recording_limit: int = 64 * 1024 * 1024  # the most bytes one terminal's asciicast takes
    close_grace: float = 2.0
    shell: tuple[str, ...] = ("/bin/bash", "-l")
    cwd: str = ""
    term: str = "xterm-256color"
    env_allowlist: tuple[str, ...] = DEFAULT_ENV_ALLOWLIST
    env: Mapping[str, str] = field(default_factory=dict)
    allow_commands: tuple[str, ...] = ()
    forbid_commands: tuple[str, ...] = ()
    # Clients' terminals in a sandbox (containment.py), seeing these paths besides the system
    # directories and their scratch; agents' terminals are sandboxed like their agent.
    sandbox: bool = False
    sandbox_read_only: tuple[str, ...] = ()
    sandbox_read_write: tuple[str, ...] = ()

    @property
    def default_cwd(self) -> str:
        return self.cwd or os.environ.get("HOME") or os.getcwd()

    @classmethod
    def from_config(cls, table: Mapping[str, Any]) -> TerminalSettings:
        """Validate the ``[terminals]`` table; raise ConfigError naming a bad key."""
        values: dict[str, Any] = {}
        for key, raw in table.items():
            parse = _KEYS.get(key)
            if parse is None:
                allowed = ", ".join(sorted(_KEYS))
                raise ConfigError(f"terminals: unknown key {key!r}; allowed keys are {allowed}")
            values[key] = parse(f"terminals.{key}", raw)
        settings = cls(**values)
        if settings.idle_timeout > settings.idle_timeout_limit:
            raise ConfigError("terminals.idle_timeout: larger than terminals.idle_timeout_limit")
        if settings.lifetime > settings.lifetime_limit:
            raise ConfigError("terminals.lifetime: larger than terminals.lifetime_limit")
        if settings.scrollback_lines > settings.scrollback_limit:
            raise ConfigError("terminals.scrollback_lines: larger than terminals.scrollback_limit")
        if settings.cwd and not os.path.isabs(settings.cwd):
            raise ConfigError(f"terminals.cwd: {settings.cwd!r} is not an absolute path")
        return settings


def _int(low: int, high: int) -> Callable[[str, Any], int]:
    def parse(key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"{key}: expected an integer from {low} to {high}, got {value!r}")
        return value

    return parse


def _seconds(low: float, high: float) -> Callable[[str, Any], float]:
    def parse(key: str, value: Any) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not low <= value <= high
        ):
            raise ConfigError(f"{key}: expected seconds from {low:g} to {high:g}, got {value!r}")
        return float(value)

    return parse


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return value


def _strings(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{key}: expected an array of non-empty strings, got {value!r}")
    return tuple(value)


def _argv(key: str, value: Any) -> tuple[str, ...]:
    argv = _strings(key, value)
    if not argv or not os.path.isabs(argv[0]):
        raise ConfigError(f"{key}: expected an array starting with an absolute path, got {value!r}")
    return argv


def _flag(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value


def _existing_paths(key: str, value: Any) -> tuple[str, ...]:
    paths = _strings(key, value)
    for path in paths:
        if not os.path.isabs(path):
            raise ConfigError(f"{key}: {path!r} is not an absolute path")
        if not os.path.exists(path):
            raise ConfigError(f"{key}: {path} does not exist")
    return tuple(os.path.normpath(p) for p in paths)


def _env(key: str, value: Any) -> Mapping[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{key}: expected a table of strings, got {value!r}")
    return dict(value)


_MB = 1024 * 1024
_KEYS: dict[str, Callable[[str, Any], Any]] = {
    "max_terminals": _int(1, 100_000),
    "max_terminals_per_owner": _int(1, 100_000),
    "idle_timeout": _seconds(1, 365 * 86400),
    "idle_timeout_limit": _seconds(1, 365 * 86400),
    "lifetime": _seconds(1, 365 * 86400),
    "lifetime_limit": _seconds(1, 365 * 86400),
    "scrollback_lines": _int(0, 10_000_000),
    "scrollback_limit": _int(0, 10_000_000),
    "output_buffer": _int(64 * 1024, 1024 * _MB),
    "input_queue": _int(64 * 1024, 1024 * _MB),
    "attach_lag": _int(64 * 1024, 1024 * _MB),
    "recording_limit": _int(4096, 64 * 1024 * _MB),
    "close_grace": _seconds(0, 60),
    "shell": _argv,
    "cwd": _text,
    "term": _text,
    "env_allowlist": _strings,
    "env": _env,
    "allow_commands": _strings,
    "forbid_commands": _strings,
    "sandbox": _flag,
    "sandbox_read_only": _existing_paths,
    "sandbox_read_write": _existing_paths,
}
assert set(_KEYS) == {f.name for f in fields(TerminalSettings)}
