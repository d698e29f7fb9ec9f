"""The environment of child processes: an allowlist, never the host's whole environment."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

# Variables passed through from the host when set. Secrets, NODE_ENV,
# PYTHONPATH and the like are not: each agent gets what it is given.
ALLOWED = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "HOME",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "SSL_CERT_FILE",
)
ALLOWED_PREFIXES = ("LC_",)
COOKIE = "ether-agent-v1"


def base_environment() -> dict[str, str]:
    """The allowlisted part of the host's environment."""
    return {
        name: value
        for name, value in os.environ.items()
        if name in ALLOWED or name.startswith(ALLOWED_PREFIXES)
    }


def python_path_of_adapter() -> str:
    """The folder that holds the ``ether_agent`` package, for agents' PYTHONPATH."""
    spec = importlib.util.find_spec("ether_agent")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the ether_agent package is not installed next to the host")
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def agent_environment(
    *, agent: str, spawn_id: str, max_frame: int, extra: dict[str, str], versions: tuple[int, ...]
) -> dict[str, str]:
    """Environment of one agent process: allowlist + launch plan + protocol contract."""
    env = base_environment()
    env.update(extra)
    env.update(
        {
            "ETHER_HOST_COOKIE": COOKIE,
            "ETHER_PROTOCOL_VERSIONS": ",".join(str(v) for v in versions),
            "ETHER_HOST_PPID": str(os.getpid()),
            "ETHER_AGENT_NAME": agent,
            "ETHER_MAX_FRAME": str(max_frame),
            "ETHER_SPAWN_ID": spawn_id,
        }
    )
    env.pop("NODE_ENV", None)
    return env
