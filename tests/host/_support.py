"""Helpers of the host-level tests: `ether serve` with a command line of the test's choosing,
one-shot runs of `ether` that are expected to fail, the real grpcurl, token files."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import (
    agent_io_pb2,
    common_pb2,
    gateway_pb2,
    supervisor_pb2,
    terminal_pb2,
    workflow_pb2,
)
from tests.support.host import ETHER, ROOT, TOOLS, HostProcess

GRPCURL = TOOLS / "grpcurl"
ETHER_SERVICES = (
    "ether.v1.AgentIOService",
    "ether.v1.WorkflowService",
    "ether.v1.SupervisorService",
    "ether.v1.TerminalService",
    "ether.v1.GatewayService",
)
HEALTH = "grpc.health.v1.Health"
README = ROOT / "README.md"
README_ADDRESS = "127.0.0.1:50051"  # the address the README's commands name
REFLECTION = "grpc.reflection.v1alpha.ServerReflection"


def clean_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without ETHER_* settings (so the caller's shell cannot leak
    a setting into a test), plus ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ETHER_")}
    return base | {"PYTHONUNBUFFERED": "1"} | (env or {})


class Host(HostProcess):
    """`ether serve` with exactly ``args``: unlike HostProcess nothing is added, so a test can
    leave a setting to the environment, a TOML file or the default. Pass ``--listen`` (port 0)
    or a unix socket yourself: the default address is the fixed 127.0.0.1:50051."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        self.state_dir = Path()
        self.command = [str(ETHER), "serve", *args]
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=clean_environment(env),
            cwd=cwd or ROOT,
        )
        self.records = []
        self.raw_lines = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        self.address = ""
        self._channel: grpc.Channel | None = None

    def _read_log(self) -> None:
        super()._read_log()
        # Reap the process before the last wake-up, so a waiter sees the exit at once instead
        # of waiting out its whole timeout for a host that died at start.
        self.process.wait()
        with self._changed:
            self._changed.notify_all()


def run_ether(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run `ether serve ARGS` to completion (for starts that must be refused)."""
    return subprocess.run(
        [str(ETHER), "serve", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=clean_environment(env),
        cwd=cwd or ROOT,
        timeout=timeout,
        check=False,
    )


def grpcurl(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run the real grpcurl binary."""
    return subprocess.run(
        [str(GRPCURL), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def write_tokens(path: Path, **tokens: str) -> Path:
    """A token file of ``NAME TOKEN`` lines, readable by its owner only."""
    path.write_text("# name token\n" + "".join(f"{n} {t}\n" for n, t in tokens.items()))
    path.chmod(0o600)
    return path


def service_descriptors() -> dict[str, ServiceDescriptor]:
    """Every service of the ether.v1 files, by full name."""
    found: dict[str, ServiceDescriptor] = {}
    for module in (
        agent_io_pb2,
        workflow_pb2,
        supervisor_pb2,
        terminal_pb2,
        gateway_pb2,
        common_pb2,
    ):
        for service in module.DESCRIPTOR.services_by_name.values():
            found[service.full_name] = service
    return found


def wait_serving_via(host: HostProcess, address: str, timeout: float = 60.0) -> dict[str, Any]:
    """Wait for the "serving" record, then for health SERVING at ``address`` (for a host that
    listens on 0.0.0.0, reached over loopback). Returns the record."""
    record = host.wait_for_log(lambda r: r.get("event") == "serving", timeout)
    host.address = address.replace("PORT", str(record["addresses"][0]).rpartition(":")[2])
    health = health_pb2_grpc.HealthStub(host.channel)
    response = health.Check(health_pb2.HealthCheckRequest(), timeout=timeout, wait_for_ready=True)
    assert response.status == health_pb2.HealthCheckResponse.SERVING
    return record


def readme_commands(block: str) -> list[str]:
    """The shell commands of the fenced block between ``<!-- BLOCK:start -->`` and
    ``<!-- BLOCK:end -->``, one per command (backslash continuations joined)."""
    text = README.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {block}:start -->\n(.*?)<!-- {block}:end -->", text, flags=re.DOTALL)
    assert found, f"README.md has no {block} block"
    fence = re.fullmatch(r"\s*```sh\n(.*?)```\s*", found.group(1), flags=re.DOTALL)
    assert fence, f"the {block} block of README.md is not one ```sh fence"
    joined = fence.group(1).replace("\\\n", " ")
    commands = [
        line.strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")
    ]
    assert commands, f"the {block} block of README.md is empty"
    return commands
