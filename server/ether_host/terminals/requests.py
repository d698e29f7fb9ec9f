"""What a caller asks of a terminal, checked: a CreateTerminal spec resolved against the host's
settings into what to launch, sizes, durations and signal names. Each bad value is
INVALID_ARGUMENT naming its field."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field

from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.reasons import Reason
from ether_host.terminals import policy
from ether_host.terminals.settings import MAX_SIZE, TerminalSettings
from ether_host.terminals.terminal import clamp_size

MAX_NAME = 128


@dataclass(frozen=True)
class CreateSpec:
    """A CreateTerminal request in domain terms."""

    argv: tuple[str, ...] | None = None  # None (and no command_line): the host's shell
    command_line: str = ""
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    rows: int = 0
    cols: int = 0
    name: str = ""
    owner: str = ""
    scrollback_lines: int = 0
    term: str = ""
    idle_timeout: float | None = None
    max_lifetime: float | None = None
    request_id: str = ""
    record: bool = False  # an asciicast of its output from the first byte (recording.py)


@dataclass(frozen=True)
class LaunchPlan:
    """A checked CreateSpec: what the new terminal runs, where, and at what size and limits."""

    program: policy.Program
    env: dict[str, str]
    cwd: str
    rows: int
    cols: int
    term: str
    scrollback_lines: int
    idle_timeout: float
    max_lifetime: float


def plan_launch(settings: TerminalSettings, spec: CreateSpec) -> LaunchPlan:
    """Check ``spec`` and fill in the host's defaults and limits."""
    rows = size(spec.rows, 24, "rows")
    cols = size(spec.cols, 80, "cols")
    cwd = spec.cwd or settings.default_cwd
    if not (os.path.isabs(cwd) and os.path.isdir(cwd)):
        raise InvalidArgument(
            f"cwd {cwd!r} is not an absolute path to a directory",
            reason=Reason.INVALID_CWD,
            violations=[FieldViolation("cwd", "an existing absolute directory")],
        )
    if len(spec.name) > MAX_NAME:
        raise InvalidArgument(
            f"name is {len(spec.name)} characters; at most {MAX_NAME}",
            reason=Reason.INVALID_NAME,
            violations=[FieldViolation("name", f"at most {MAX_NAME} characters")],
        )
    term = spec.term or settings.term
    if len(term) > 64 or not term.isprintable() or " " in term:
        raise InvalidArgument(
            f"term {term!r} is not a terminal type name",
            reason=Reason.INVALID_TERM,
            violations=[FieldViolation("term", "a name such as xterm-256color")],
        )
    if spec.scrollback_lines < 0:
        raise InvalidArgument(
            "scrollback_lines is negative",
            reason=Reason.INVALID_SCROLLBACK,
            violations=[FieldViolation("scrollback_lines", "0 or more")],
        )
    scrollback = min(spec.scrollback_lines or settings.scrollback_lines, settings.scrollback_limit)
    idle = duration(
        spec.idle_timeout, settings.idle_timeout, settings.idle_timeout_limit, "idle_timeout"
    )
    lifetime = duration(
        spec.max_lifetime, settings.lifetime, settings.lifetime_limit, "max_lifetime"
    )
    env = policy.build_env(settings, spec.env)
    argv = (
        list(settings.shell)
        if spec.argv is None and not spec.command_line
        else list(spec.argv or ())
    )
    program = policy.resolve(settings, argv, spec.command_line, env)
    return LaunchPlan(program, env, cwd, rows, cols, term, scrollback, idle, lifetime)


def size(value: int, default: int, name: str, keep: int = 0) -> int:
    """Rows or columns: negative is an error, 0 the default (or ``keep``), large values clamped."""
    if value < 0:
        raise InvalidArgument(
            f"{name} {value} is negative; use 1 to {MAX_SIZE}, or 0 for "
            + ("the current size" if keep else "the default"),
            reason=Reason.INVALID_SIZE,
            violations=[FieldViolation(name, f"0 to {MAX_SIZE}")],
        )
    if keep:
        return clamp_size(value, keep)
    return clamp_size(value, default)


def duration(value: float | None, default: float, limit: float, name: str) -> float:
    if value is None:
        return default
    if value <= 0:
        raise InvalidArgument(
            f"{name} must be positive (leave it unset for the host default)",
            reason=Reason.INVALID_DURATION,
            violations=[FieldViolation(name, "a positive duration")],
        )
    return min(value, limit)


def parse_signal(name: str) -> int:
    """'SIGINT', 'int' or '2' -> 2; unknown names and numbers are INVALID_ARGUMENT."""
    text = name.strip()
    if text.isdigit():
        number = int(text)
        if 1 <= number <= signal.SIGRTMAX:
            return number
    else:
        upper = text.upper()
        upper = upper if upper.startswith("SIG") else "SIG" + upper
        found = getattr(signal.Signals, upper, None) if upper.isidentifier() else None
        if isinstance(found, signal.Signals):
            return int(found)
    raise InvalidArgument(
        f"unknown signal {name!r}; use a name such as SIGINT or INT, or a number",
        reason=Reason.INVALID_SIGNAL,
        violations=[FieldViolation("signal", "a signal name or number")],
    )
