"""What an agent folder is: its language (detected or declared) and its settings.

Settings come from the deploy request first, then the folder's
``agent.toml``, then defaults. Two languages and no manifest is an error
naming both marker files, never a guess.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.procs import CPU_POLICIES

LANGUAGES = ("python", "go", "typescript")
KINDS = ("general", "io_gateway")
RESTART_POLICIES = ("always", "on-failure", "never")
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
MANIFEST = "agent.toml"

# Marker files per language, in the order they are reported.
MARKERS = {
    "python": ("pyproject.toml", "requirements.txt", "agent.py"),
    "go": ("go.mod",),
    "typescript": ("package.json", "tsconfig.json"),
}


@dataclass
class AgentSpec:
    """A deployment, with every default filled in."""

    name: str
    path: Path
    language: str
    kind: str = "general"
    replicas: int = 1
    restart: str = "on-failure"
    description: str = ""
    module: str = "agent"
    function: str = ""
    main: str = ""  # TypeScript: compiled entry (default: package.json main, then dist/agent.js)
    command: list[str] = field(default_factory=list)  # explicit argv, relative to the folder
    protocol: str = "auto"  # "auto" (hello expected) or "legacy" (seeds' envelope)
    env: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    capabilities: list[str] = field(default_factory=list)
    allowed_calls: list[str] = field(default_factory=lambda: ["agent.call"])
    start_timeout: float = 30.0
    stop_grace: float = 5.0
    cancel_grace: float = 5.0  # after a cancel frame, how long a task may take to answer
    max_queue: int = 1000
    max_frame: int = 16 * 1024 * 1024
    # Restart policy tunables (supervisor-anchors P5-P7); agent.toml may set them.
    backoff_base: float = 1.0
    backoff_cap: float = 60.0
    start_retries: int = 3
    max_restarts: int = 5
    restart_period: float = 300.0
    stable_after: float = 10.0
    reset_after: float = 300.0
    legacy_after: float = 5.0  # silence before a hello-less child is run with the seeds' envelope
    # Agents that declare ping get one every ping_interval; three unanswered -> restarted.
    ping_interval: float = 15.0
    ping_timeout: float = 10.0
    # "batch": woken by a frame, the agent waits for the host to reach its next wait instead
    # of preempting it, so the host writes a burst of frames per wakeup (bench: Pipe +10-25 %
    # at 64 in flight on two cores). "other" is Linux's default; "idle" runs only on spare CPU.
    cpu_scheduling_policy: str = "batch"


def _bad(field_name: str, problem: str) -> InvalidArgument:
    return InvalidArgument(
        f"{field_name}: {problem}",
        reason="INVALID_AGENT_SPEC",
        violations=[FieldViolation(field_name, problem)],
    )


def detect_language(path: Path) -> str:
    """The folder's language from its marker files; raise when none or several."""
    found = {lang: [m for m in markers if (path / m).exists()] for lang, markers in MARKERS.items()}
    found = {lang: files for lang, files in found.items() if files}
    if not found and any(path.glob("*.py")):
        return "python"
    if len(found) == 1:
        return next(iter(found))
    if not found:
        raise _bad(
            "spec.path",
            f"cannot tell the language of {path}: no pyproject.toml, requirements.txt, "
            "agent.py, go.mod or package.json; set language in agent.toml",
        )
    named = " and ".join(f"{files[0]} ({lang})" for lang, files in found.items())
    raise _bad(
        "spec.path", f'{path} has {named}; name the language in agent.toml (language = "...")'
    )


def read_manifest(path: Path) -> dict[str, Any]:
    file = path / MANIFEST
    if not file.exists():
        return {}
    try:
        with file.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise _bad("agent.toml", f"{file}: {error}") from None


def _number(values: dict[str, Any], key: str, low: float, high: float) -> float | None:
    if values.get(key) in (None, ""):
        return None
    value = values[key]
    if not isinstance(value, int | float) or not low <= value <= high:
        raise _bad(key, f"{value!r} is out of range {low:g}..{high:g}")
    return float(value)


def _int_or(value: float | None, default: int) -> int:
    return default if value is None else int(value)


def build_spec(request: dict[str, Any]) -> AgentSpec:
    """Merge a deploy request (keys as in AgentSpec) with the folder's agent.toml."""
    raw_path = str(request.get("path") or "")
    if not raw_path:
        raise _bad("spec.path", "required: the absolute path of the agent folder")
    path = Path(raw_path).expanduser().absolute()
    if not path.is_dir():
        raise _bad("spec.path", f"{path} is not a directory")
    manifest = read_manifest(path)
    merged = {k: v for k, v in manifest.items()} | {
        k: v for k, v in request.items() if v not in (None, "", 0, [], {})
    }

    name = str(merged.get("name") or path.name).lower().replace(".", "-")
    if not NAME_PATTERN.match(name):
        raise _bad(
            "spec.name", f"{name!r} must be 1-64 characters of a-z 0-9 _ -, starting with a letter"
        )
    language = str(merged.get("language") or "").lower() or detect_language(path)
    if language not in LANGUAGES:
        raise _bad("spec.language", f"{language!r} is not one of {', '.join(LANGUAGES)}")
    kind = str(merged.get("type") or merged.get("kind") or "general").lower()
    if kind not in KINDS:
        raise _bad("spec.type", f"{kind!r} is not one of {', '.join(KINDS)}")
    restart = str(merged.get("restart") or "on-failure").lower().replace("_", "-")
    if restart not in RESTART_POLICIES:
        raise _bad("spec.restart", f"{restart!r} is not one of {', '.join(RESTART_POLICIES)}")
    replicas = int(_number(merged, "replicas", 1, 64) or 1)
    command = merged.get("command") or []
    if isinstance(command, str):
        command = command.split()
    protocol = str(merged.get("protocol") or "auto")
    if protocol not in ("auto", "legacy"):
        raise _bad("spec.protocol", f"{protocol!r} is not auto or legacy")
    cpu_policy = str(merged.get("cpu_scheduling_policy") or "batch").lower()
    if cpu_policy not in CPU_POLICIES:
        raise _bad(
            "spec.cpu_scheduling_policy",
            f"{cpu_policy!r} is not one of {', '.join(CPU_POLICIES)} (as in systemd's "
            "CPUSchedulingPolicy=; real-time policies need privileges the host does not take)",
        )
    return AgentSpec(
        name=name,
        path=path,
        language=language,
        kind=kind,
        replicas=replicas,
        restart=restart,
        description=str(merged.get("description") or ""),
        module=str(merged.get("module") or "agent"),
        function=str(merged.get("function") or ""),
        main=str(merged.get("main") or ""),
        command=[str(part) for part in command],
        protocol=protocol,
        env={str(k): str(v) for k, v in dict(merged.get("env") or {}).items()},
        config=dict(merged.get("config") or {}),
        capabilities=[str(c) for c in merged.get("capabilities") or []],
        allowed_calls=[
            str(c) for c in merged.get("calls") or merged.get("allowed_calls") or ["agent.call"]
        ],
        start_timeout=_number(merged, "start_timeout", 0.1, 600) or 30.0,
        stop_grace=_number(merged, "stop_grace", 0, 600) or 5.0,
        cancel_grace=_number(merged, "cancel_grace", 0.01, 600) or 5.0,
        max_queue=int(_number(merged, "max_queue", 1, 100000) or 1000),
        max_frame=int(_number(merged, "max_frame", 1024, 256 * 1024 * 1024) or 16 * 1024 * 1024),
        backoff_base=_number(merged, "backoff_base", 0.05, 60) or 1.0,
        backoff_cap=_number(merged, "backoff_cap", 0.05, 3600) or 60.0,
        start_retries=_int_or(_number(merged, "start_retries", 0, 100), 3),
        max_restarts=_int_or(_number(merged, "max_restarts", 0, 1000), 5),
        restart_period=_number(merged, "restart_period", 1, 86400) or 300.0,
        stable_after=_number(merged, "stable_after", 0.01, 3600) or 10.0,
        reset_after=_number(merged, "reset_after", 0.01, 86400) or 300.0,
        legacy_after=_number(merged, "legacy_after", 0.01, 600) or 5.0,
        ping_interval=_number(merged, "ping_interval", 0.05, 3600) or 15.0,
        ping_timeout=_number(merged, "ping_timeout", 0.05, 600) or 10.0,
        cpu_scheduling_policy=cpu_policy,
    )
