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
from ether_host.reasons import Reason
from ether_host.resources import agent_limits
from ether_host.value_levels import MAX_VALUE_LEVELS, nests_too_deep

LANGUAGES = ("python", "go", "typescript")
KINDS = ("general", "io_gateway")
PROTOCOLS = ("auto", "legacy", "mcp")
# agent.toml's `kind = "mcp"`: a general agent whose link speaks MCP (link/mcp.py).
MCP = "mcp"
INSTALL_KEYS = ("npm", "pip")
MCP_CONCURRENCY = 64
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
    # "auto" (hello expected), "legacy" (seeds' envelope) or "mcp" (an MCP stdio server)
    protocol: str = "auto"
    env: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    capabilities: list[str] = field(default_factory=list)
    allowed_calls: list[str] = field(default_factory=lambda: ["agent.call"])
    start_timeout: float = 30.0
    # The whole INSTALLING phase (dependencies, build, waiting for another build of the folder).
    install_timeout: float = 600.0
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
    # agent.toml's [limits]: the host's limits of each replica, lowered (resources.py).
    limits: dict[str, int] = field(default_factory=dict)
    # agent.toml's [sandbox]: may narrow what the host config's [sandbox] gives (sandbox.py).
    sandbox: dict[str, Any] = field(default_factory=dict)
    # agent.toml's [install]: npm and/or pip dependencies of a `command` (MCP servers).
    install: dict[str, bool] = field(default_factory=dict)
    # MCP agents: tasks one process runs at once (Ether agents declare theirs in hello).
    max_concurrency: int = MCP_CONCURRENCY


def _bad(field_name: str, problem: str) -> InvalidArgument:
    return InvalidArgument(
        f"{field_name}: {problem}",
        reason=Reason.INVALID_AGENT_SPEC,
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


class _Merged:
    """A deploy request over the folder's agent.toml, remembering where each value came from
    so that an error names the request's field or the file's key."""

    def __init__(self, request: dict[str, Any], manifest: dict[str, Any]) -> None:
        # A request states only what it sets (transport/supervisor.py leaves unset fields out).
        requested = {
            k: v for k, v in request.items() if v is not None and v != "" and v != [] and v != {}
        }
        self.values = manifest | requested
        self._origin = {k: f"agent.toml {k}" for k in manifest} | {
            k: f"spec.{k}" for k in requested
        }

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def field(self, key: str) -> str:
        return self._origin.get(key, f"spec.{key}")

    def number(self, key: str, low: float, high: float) -> float | None:
        value = self.values.get(key)
        if value in (None, ""):
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not low <= value <= high
        ):
            raise _bad(self.field(key), f"{value!r} is out of range {low:g}..{high:g}")
        return float(value)

    def setting(self, key: str, low: float, high: float, default: float) -> float:
        """A number in low..high, or ``default`` when unset (0 is a value, not "unset")."""
        value = self.number(key, low, high)
        return default if value is None else value

    def strings(self, key: str, example: str) -> list[str] | None:
        """A list of strings (numbers are written as text), or None when unset. agent.toml is
        the user's TOML: a number or a string where a list belongs is refused naming the key,
        never taken apart (``capabilities = "fs"`` is not three capabilities)."""
        value = self.values.get(key)
        if value in (None, "", []):
            return None
        if not isinstance(value, list) or not all(
            isinstance(part, str | int | float) and not isinstance(part, bool) for part in value
        ):
            raise _bad(self.field(key), f"{value!r} is not a list of strings, such as {example}")
        return [str(part) for part in value]

    def table(self, key: str, example: str) -> dict[str, Any]:
        """A table (``[env]``, ``[config]``), or {} when unset."""
        value = self.values.get(key)
        if value in (None, {}):
            return {}
        if not isinstance(value, dict):
            raise _bad(self.field(key), f"{value!r} is not a table, such as {example}")
        return value


def build_spec(request: dict[str, Any]) -> AgentSpec:
    """Merge a deploy request (keys as in AgentSpec) with the folder's agent.toml."""
    raw_path = str(request.get("path") or "")
    if not raw_path:
        raise _bad("spec.path", "required: the absolute path of the agent folder")
    path = Path(raw_path).expanduser().absolute()
    try:
        is_dir = path.is_dir()
    except OSError as error:  # a name longer than the file system allows (ENAMETOOLONG), ...
        raise _bad("spec.path", f"{path} cannot name a folder: {error.strerror}") from None
    if not is_dir:
        raise _bad("spec.path", f"{path} is not a directory")
    merged = _Merged(request, read_manifest(path))

    given = merged.get("name")
    # A name someone chose is used as written, or refused: folded silently, "Scout" would be
    # deployed as "scout" and not be found under the name its caller knows. Only a folder's
    # name, the default, is folded to the pattern ("My.Agent" runs as "my-agent").
    name = str(given) if given else path.name.lower().replace(".", "-")
    if not NAME_PATTERN.match(name):
        raise _bad(
            merged.field("name"),
            f"{name!r} must be 1-64 characters of a-z 0-9 _ -, starting with a letter",
        )
    kind = str(merged.get("type") or merged.get("kind") or "general").lower()
    protocol = str(merged.get("protocol") or "auto")
    if kind == MCP:
        kind, protocol = "general", MCP
    mcp = protocol == MCP
    language = str(merged.get("language") or "").lower()
    if not language:
        # An MCP server runs its own command: its language is only shown, never guessed loudly.
        language = _quiet_language(path) if mcp else detect_language(path)
    if language not in LANGUAGES and not (mcp and not language):
        raise _bad(merged.field("language"), f"{language!r} is not one of {', '.join(LANGUAGES)}")
    if kind not in KINDS:
        raise _bad(merged.field("type"), f"{kind!r} is not one of {', '.join(KINDS)}")
    restart = str(merged.get("restart") or "on-failure").lower().replace("_", "-")
    if restart not in RESTART_POLICIES:
        raise _bad(
            merged.field("restart"), f"{restart!r} is not one of {', '.join(RESTART_POLICIES)}"
        )
    replicas = int(merged.setting("replicas", 1, 64, 1))
    command = merged.get("command") or []
    if isinstance(command, str):  # "node server.js": split on spaces
        command = command.split()
    else:
        command = merged.strings("command", '["node", "server.js"]') or []
    if protocol not in PROTOCOLS:
        raise _bad(merged.field("protocol"), f"{protocol!r} is not auto, legacy or mcp")
    if mcp and not command:
        raise _bad(
            merged.field("command"),
            'required for an MCP agent (kind = "mcp"): the server\'s argv, such as '
            '["node", "node_modules/some-server/dist/index.js"]',
        )
    install = _install(merged)
    cpu_policy = str(merged.get("cpu_scheduling_policy") or "batch").lower()
    if cpu_policy not in CPU_POLICIES:
        raise _bad(
            merged.field("cpu_scheduling_policy"),
            f"{cpu_policy!r} is not one of {', '.join(CPU_POLICIES)} (as in systemd's "
            "CPUSchedulingPolicy=; real-time policies need privileges the host does not take)",
        )
    sandbox = merged.get("sandbox") or {}
    if not isinstance(sandbox, dict):
        raise _bad(
            merged.field("sandbox"),
            "must be a table: [sandbox] with network, read_only, read_write",
        )
    limits = agent_limits(merged.get("limits") or {})  # INVALID_ARGUMENT naming a bad key
    config = dict(merged.table("config", "[config] depth = 3"))
    if nests_too_deep(config):  # GetAgent answers it as a Struct: one no client could decode
        raise _bad(
            merged.field("config"),
            "nests tables and arrays deeper than a protobuf Struct can carry to a client "
            f"(at most {MAX_VALUE_LEVELS} levels: a table takes 3, an array 2)",
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
        command=command,
        protocol=protocol,
        env={str(k): str(v) for k, v in merged.table("env", '[env] LEVEL = "debug"').items()},
        config=config,
        capabilities=merged.strings("capabilities", '["filesystem"]') or [],
        allowed_calls=(
            merged.strings("calls", '["agent.call", "net.fetch"]')
            or merged.strings("allowed_calls", '["agent.call", "net.fetch"]')
            or ["agent.call"]
        ),
        start_timeout=merged.setting("start_timeout", 0.1, 600, 30.0),
        install_timeout=merged.setting("install_timeout", 1, 3600, 600.0),
        stop_grace=merged.setting("stop_grace", 0, 600, 5.0),
        cancel_grace=merged.setting("cancel_grace", 0.01, 600, 5.0),
        max_queue=int(merged.setting("max_queue", 1, 100000, 1000)),
        max_frame=int(merged.setting("max_frame", 1024, 256 * 1024 * 1024, 16 * 1024 * 1024)),
        backoff_base=merged.setting("backoff_base", 0.05, 60, 1.0),
        backoff_cap=merged.setting("backoff_cap", 0.05, 3600, 60.0),
        start_retries=int(merged.setting("start_retries", 0, 100, 3)),
        max_restarts=int(merged.setting("max_restarts", 0, 1000, 5)),
        restart_period=merged.setting("restart_period", 1, 86400, 300.0),
        stable_after=merged.setting("stable_after", 0.01, 3600, 10.0),
        reset_after=merged.setting("reset_after", 0.01, 86400, 300.0),
        legacy_after=merged.setting("legacy_after", 0.01, 600, 5.0),
        ping_interval=merged.setting("ping_interval", 0.05, 3600, 15.0),
        ping_timeout=merged.setting("ping_timeout", 0.05, 600, 10.0),
        cpu_scheduling_policy=cpu_policy,
        limits=limits,
        sandbox=sandbox,
        install=install,
        max_concurrency=int(merged.setting("max_concurrency", 1, 1024, MCP_CONCURRENCY)),
    )


def _quiet_language(path: Path) -> str:
    """The folder's language when its marker files tell one, else empty (no error)."""
    try:
        return detect_language(path)
    except InvalidArgument:
        return ""


def _install(merged: _Merged) -> dict[str, bool]:
    table = merged.get("install") or {}
    if not isinstance(table, dict):
        raise _bad(merged.field("install"), "must be a table: [install] with npm and pip")
    unknown = sorted(set(table) - set(INSTALL_KEYS))
    if unknown:
        raise _bad(
            merged.field("install"), f"unknown key {unknown[0]!r}; [install] takes npm and pip"
        )
    for key, value in table.items():
        if not isinstance(value, bool):
            raise _bad(f"{merged.field('install')}.{key}", f"{value!r} is not true or false")
    return {key: bool(value) for key, value in table.items()}
