"""The agents suite's fixture: what runs (bare gRPC server, floor host, Ether host, echo agents in
three languages), the targets measured against it in their round order, and how long each
measurement runs (Settings)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import LOCAL, PYTHON, REPO, EtherHost, read_json_line, spawn, stop_process

ECHO = Path(__file__).resolve().parent / "echo"
STATE_DIR = REPO / ".ether" / "bench"  # kept between runs: Go and TypeScript builds stay cached
IN_FLIGHT = 64
AGENTS = {"py": "python", "go": "go", "ts": "typescript"}  # key -> folder under echo/ (echo-<key>)


@dataclass
class Settings:
    latency_rounds: int = 4
    latency_count: int = 500
    latency_warmup: int = 100
    latency_time_limit: float = 8.0
    throughput_rounds: int = 3
    throughput_warmup: float = 0.5
    throughput_duration: float = 2.0
    profile_seconds: int = 5
    quiet_budget: float = 10.0  # seconds in all to wait for other processes to calm down

    @classmethod
    def quick(cls) -> Settings:
        return cls(1, 200, 30, 4.0, 1, 0.5, 1.5, 3, 5.0)


@dataclass
class Target:
    """One thing to measure: its key in the results, its label, and the client's spec."""

    key: str
    label: str
    spec: dict[str, Any]


# --- the fixture: bare gRPC server, host, agents -------------------------------------------------


@dataclass
class Fixture:
    """The running bare gRPC server and host, and the echo agents that deployed (or why not)."""

    loop: str
    grpc_server: subprocess.Popen[bytes]
    grpc_address: str
    host: EtherHost
    lean: subprocess.Popen[bytes] | None = None  # echo/lean_host.py: the design's floor
    lean_address: str = ""
    lean_child: int = 0
    agents: dict[str, str] = field(default_factory=dict)  # "py" -> "echo-py"
    agent_pids: dict[str, int] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)  # "go" -> why
    deploy_s: dict[str, float] = field(default_factory=dict)

    def ours(self) -> list[int]:
        lean = [self.lean.pid, self.lean_child] if self.lean is not None else []
        return [
            os.getpid(),
            self.grpc_server.pid,
            self.host.pid,
            *self.agent_pids.values(),
            *lean,
        ]

    def stop(self) -> None:
        self.host.stop()
        stop_process(self.grpc_server)
        if self.lean is not None:
            stop_process(self.lean)


def start(loop: str, log_dir: Path) -> Fixture:
    server = spawn([PYTHON, str(ECHO / "grpc_server.py"), "--loop", loop])
    try:
        port = read_json_line(server, timeout=30)["port"]
        host = EtherHost(STATE_DIR, log_dir / "host.log")
    except BaseException:
        stop_process(server)
        raise
    fx = Fixture(loop, server, f"{LOCAL}:{port}", host)
    try:
        fx.lean = spawn([PYTHON, str(ECHO / "lean_host.py"), "--loop", loop])
        started = read_json_line(fx.lean, timeout=30)
        fx.lean_address, fx.lean_child = f"{LOCAL}:{started['port']}", started["child"]

        def deploy(key: str) -> tuple[str, float]:
            began = time.perf_counter()
            name = host.deploy(ECHO / AGENTS[key], name=f"echo-{key}")
            return name, time.perf_counter() - began

        with ThreadPoolExecutor(len(AGENTS)) as pool:
            futures = {key: pool.submit(deploy, key) for key in AGENTS}
            for key, future in futures.items():
                try:
                    name, seconds = future.result()
                except Exception as error:  # reported with the results; the rest still runs
                    fx.unavailable[key] = str(error).strip().splitlines()[0][:200]
                    print(f"  echo-{key} unavailable: {error}", file=sys.stderr)
                    continue
                fx.agents[key], fx.deploy_s[key] = name, seconds
                fx.agent_pids[key] = host.pids(name)[0]
    except BaseException:
        fx.stop()
        raise
    return fx


def targets_of(fx: Fixture) -> tuple[list[Target], list[Target]]:
    """The c=1 targets and the 64-in-flight targets, in their round order."""
    bare = {"address": fx.grpc_address, "agent": "", "pids": {"server": fx.grpc_server.pid}}
    grpc = Target("grpc", "bare grpc.aio unary echo", {"kind": "unary", **bare})
    stdio_spec = {"kind": "stdio", "loop": fx.loop, "pids": {}}
    stdio = Target("stdio", "bare stdio JSON echo (Python child)", stdio_spec)
    latency = [grpc, stdio]
    throughput = [
        grpc,
        stdio,
        Target("bidi", "bare grpc.aio bidi-stream echo", {"kind": "stream", **bare}),
    ]
    for key, name in fx.agents.items():
        pids = {"server": fx.host.pid, "child": fx.agent_pids[key]}
        ether = {"address": fx.host.address, "agent": name, "pids": pids}
        execute = Target(
            f"execute-{key}", f"Ether Execute -> {key} agent", {"kind": "unary", **ether}
        )
        latency.append(execute)
        if key == "py":
            throughput.append(execute)
            struct = Target(
                "execute-py-struct",
                "Ether Execute -> py agent, Struct params and data",
                {"kind": "unary", "encoding": "struct", **ether},
            )
            latency.append(struct)
            throughput.append(struct)
        throughput.append(
            Target(f"pipe-{key}", f"Ether Pipe -> {key} agent", {"kind": "stream", **ether})
        )
    lean_pids = {"server": fx.lean.pid if fx.lean else 0, "child": fx.lean_child}
    lean = Target(
        "lean",
        "floor: lean host (grpc.aio Execute -> stdio child, nothing else)",
        {"kind": "unary", "address": fx.lean_address, "agent": "echo", "pids": lean_pids},
    )
    mcp = Target("mcp", "MCP Python SDK, low-level Server, stdio", {"kind": "mcp", "pids": {}})
    lean_pipe = Target(
        "lean-pipe",
        "floor: lean host Pipe (grpc.aio bidi -> stdio child, nothing else)",
        {"kind": "stream", "address": fx.lean_address, "agent": "echo", "pids": lean_pids},
    )
    latency += [lean, mcp]
    throughput += [lean, lean_pipe]
    return latency, throughput
