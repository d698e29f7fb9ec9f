"""What a terminal may run and with which environment.

Commands are checked on the *resolved* path of argv[0] (looked up on the
terminal's PATH, then with symlinks followed), never on substrings of a
command line. A rule is a path or a glob (``/usr/bin/*``), matched against
both the path found on PATH and its real path, or a bare name (``sudo``,
``python3*``), matched against the base names of those two paths.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from ether_host.errors import FieldViolation, InvalidArgument, NotFound, PermissionDenied
from ether_host.reasons import Reason
from ether_host.terminals.settings import TerminalSettings

COMMAND_LINE_SHELL = "/bin/sh"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HOST_SET = ("TERM", "ETHER_SPAWN_ID", "ETHER_TERMINAL_ID")


@dataclass(frozen=True)
class Program:
    """A program ready to spawn: argv with argv[0] resolved, and where it was found."""

    argv: tuple[str, ...]
    display_argv: tuple[str, ...]
    path: str


def build_env(settings: TerminalSettings, requested: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted host variables, then the configured ones, then the request's."""
    for name, value in requested.items():
        if not ENV_NAME.fullmatch(name):
            raise InvalidArgument(
                f"env: {name!r} is not a valid variable name (letters, digits and _, not starting with a digit)",
                reason=Reason.INVALID_ENV,
                violations=[FieldViolation(f"env[{name}]", "invalid name")],
            )
        if "\0" in value:
            raise InvalidArgument(
                f"env: the value of {name} contains a NUL byte",
                reason=Reason.INVALID_ENV,
                violations=[FieldViolation(f"env[{name}]", "NUL byte in value")],
            )
        if name in HOST_SET:
            raise InvalidArgument(
                f"env: {name} is set by the host; use the request's fields instead",
                reason=Reason.INVALID_ENV,
                violations=[FieldViolation(f"env[{name}]", "set by the host")],
            )
    env = {name: os.environ[name] for name in settings.env_allowlist if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(settings.env)
    env.update(requested)
    return env


def resolve(
    settings: TerminalSettings, argv: list[str], command_line: str, env: Mapping[str, str]
) -> Program:
    """Resolve argv[0] on the terminal's PATH and check the command policy on it."""
    if command_line:
        program = _resolve_one(COMMAND_LINE_SHELL, env)
        _check(settings, program, COMMAND_LINE_SHELL)
        try:
            words = shlex.split(command_line)
        except ValueError as error:
            raise InvalidArgument(
                f"command_line: {error}",
                reason=Reason.INVALID_COMMAND_LINE,
                violations=[FieldViolation("command_line", str(error))],
            ) from None
        first = next((w for w in words if not ENV_ASSIGNMENT.fullmatch(w)), "")
        if first and (settings.allow_commands or settings.forbid_commands):
            found = _which(first, env)
            if found is not None:
                _check(settings, found, first)
        argv = [program, "-c", command_line]
        return Program(tuple(argv), (COMMAND_LINE_SHELL, "-c", command_line), program)
    if not argv or not argv[0]:
        raise InvalidArgument(
            "argv: give at least the program to run",
            reason=Reason.EMPTY_ARGV,
            violations=[FieldViolation("argv.args", "at least one element")],
        )
    path = _resolve_one(argv[0], env)
    _check(settings, path, argv[0])
    return Program((path, *argv[1:]), tuple(argv), path)


ENV_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)


def _which(name: str, env: Mapping[str, str]) -> str | None:
    if "/" in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH", os.defpath))


def _resolve_one(name: str, env: Mapping[str, str]) -> str:
    found = _which(name, env)
    if found is None:
        where = "" if "/" in name else f" on PATH {env.get('PATH', os.defpath)!r}"
        raise NotFound(
            f"program {name!r} not found{where} (or not executable)",
            reason=Reason.PROGRAM_NOT_FOUND,
            resource=("program", name),
        )
    return os.path.abspath(found)


def _matches(rule: str, path: str) -> bool:
    real = os.path.realpath(path)
    if "/" in rule:
        return fnmatch.fnmatchcase(path, rule) or fnmatch.fnmatchcase(real, rule)
    return fnmatch.fnmatchcase(os.path.basename(path), rule) or fnmatch.fnmatchcase(
        os.path.basename(real), rule
    )


def _check(settings: TerminalSettings, path: str, asked: str) -> None:
    for rule in settings.forbid_commands:
        if _matches(rule, path):
            raise PermissionDenied(
                f"program {asked!r} (resolved to {os.path.realpath(path)}) is forbidden by the host's "
                f"terminals.forbid_commands rule {rule!r}",
                reason=Reason.COMMAND_FORBIDDEN,
                metadata={"rule": rule, "path": os.path.realpath(path)},
            )
    if settings.allow_commands and not any(
        _matches(rule, path) for rule in settings.allow_commands
    ):
        raise PermissionDenied(
            f"program {asked!r} (resolved to {os.path.realpath(path)}) matches no terminals.allow_commands rule "
            f"({', '.join(settings.allow_commands)})",
            reason=Reason.COMMAND_NOT_ALLOWED,
            metadata={"path": os.path.realpath(path)},
        )
