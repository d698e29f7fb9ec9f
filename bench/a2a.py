"""What A2A costs over Ether's own call: an A2A SendMessage of the echo action against an Execute
of the same action, on one host, in one run (``make bench ARGS='--only a2a'`` or
``python -m bench.a2a``).

One host runs the Python echo agent (bench/echo/python). A client (uvloop, grpc.aio, one channel)
calls it both ways with the same ~1 KB params, in rounds that alternate which goes first, so a change
of the machine's load hits both alike:

- Execute: ``ether.v1.AgentIOService/Execute`` with ``{agent, action, params}``.
- SendMessage: ``lf.a2a.v1.A2AService/SendMessage`` with the agent as tenant, the action as the
  ``skill`` metadata and the params as a data part; the answer is the finished Task (status,
  artifact, history, Ether's metadata), as a2a-sdk's client gets it.

Both through the generated stubs, so the figures are the host's paths, not a client library's.
Sequential: p50 latency per call; 64 in flight: calls per second. The ratio is SendMessage over
Execute (latency: above 1 is slower; throughput: below 1 is slower).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.common import REPO, EtherHost, median, percentile, run_async
from bench.report import machine_markdown, write_section

ECHO = REPO / "bench" / "echo" / "python"
IN_FLIGHT = 64
PARAMS: dict[str, Any] = {"text": "x" * 1000, "n": 1}


async def _measure(
    address: str, count: int, seconds: float, send_first: bool
) -> dict[str, dict[str, float]]:
    """One round: sequential p50 (µs) and the rate at IN_FLIGHT (calls/s), both ways, in the
    order ``send_first`` says."""
    import grpc
    from a2a.types import a2a_pb2, a2a_pb2_grpc
    from google.protobuf import json_format, struct_pb2

    from ether.v1 import agent_io_pb2, agent_io_pb2_grpc

    async with grpc.aio.insecure_channel(address) as channel:
        agents = agent_io_pb2_grpc.AgentIOServiceStub(channel)
        a2a = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        execute = agent_io_pb2.ExecuteRequest()
        execute.input.agent, execute.input.action = "echo", "echo"
        execute.input.params.update(PARAMS)
        message = a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id="bench")
        value = struct_pb2.Value()
        json_format.ParseDict(PARAMS, value)
        message.parts.add(data=value)
        message.metadata.update({"skill": "echo"})
        send = a2a_pb2.SendMessageRequest(tenant="echo", message=message)
        version = (("a2a-version", "1.0"),)

        async def one_execute() -> None:
            answer = await agents.Execute(execute, timeout=30)
            assert answer.output.status == agent_io_pb2.TASK_STATUS_SUCCESS, answer

        async def one_send() -> None:
            answer = await a2a.SendMessage(send, timeout=30, metadata=version)
            assert answer.task.status.state == a2a_pb2.TASK_STATE_COMPLETED, answer

        found: dict[str, dict[str, float]] = {}
        ways = [("execute", one_execute), ("send", one_send)]
        for name, call in reversed(ways) if send_first else ways:
            for _ in range(50):  # warm-up
                await call()
            latencies = []
            for _ in range(count):
                began = time.perf_counter()
                await call()
                latencies.append((time.perf_counter() - began) * 1e6)
            found[name] = {
                "p50": percentile(latencies, 50),
                "rate": await _rate(call, seconds),
            }
        return found


async def _rate(call: Callable[[], Awaitable[None]], seconds: float) -> float:
    """Calls per second with IN_FLIGHT calls at a time for ``seconds``."""
    done = 0
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await call()
            done += 1

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return done / (time.perf_counter() - began)


def main(quick: bool = False) -> int:
    rounds = 2 if quick else 5
    count, seconds = (200, 1.0) if quick else (1000, 3.0)
    results: dict[str, dict[str, list[float]]] = {
        name: {"p50": [], "rate": []} for name in ("execute", "send")
    }
    with tempfile.TemporaryDirectory(prefix="ether-bench-a2a-") as tmp:
        root = Path(tmp)
        with EtherHost(root / "state", root / "host.log") as host:
            host.deploy(ECHO, name="echo")
            for index in range(rounds):
                found: dict[str, dict[str, float]] = run_async(
                    _measure(host.address, count, seconds, send_first=index % 2 == 1),
                    loop="uvloop",
                )
                for name, figures in found.items():
                    for key, figure in figures.items():
                        results[name][key].append(figure)
                print(f"  round {index + 1}/{rounds} done", file=sys.stderr, flush=True)
    execute, send = results["execute"], results["send"]
    p50_execute, p50_send = median(execute["p50"]), median(send["p50"])
    rate_execute, rate_send = median(execute["rate"]), median(send["rate"])
    table = [
        "| measure | Execute | A2A SendMessage | SendMessage / Execute |",
        "|---|---|---|---|",
        f"| p50 at 1 in flight, µs | {p50_execute:,.0f} | {p50_send:,.0f} | "
        f"{p50_send / p50_execute:.2f} |",
        f"| calls/s at {IN_FLIGHT} in flight | {rate_execute:,.0f} | {rate_send:,.0f} | "
        f"{rate_send / rate_execute:.2f} |",
    ]
    body = "\n".join(
        [
            f"`python -m bench --only a2a{' --quick' if quick else ''}` (bench/a2a.py), "
            f"{time.strftime('%Y-%m-%d')}: the Python echo agent (bench/echo/python) called with "
            "the same ~1 KB params through `ether.v1.AgentIOService/Execute` and through "
            "`lf.a2a.v1.A2AService/SendMessage` (tenant `echo`, skill metadata `echo`, a data "
            "part; answered with the finished Task), generated stubs on one grpc.aio channel "
            f"(uvloop); {rounds} alternating rounds of {count} sequential calls after 50 "
            f"warm-up calls, then {seconds:g} s at {IN_FLIGHT} in flight; medians of the rounds. "
            f"Load average at the end (2 cores, shared with other work): "
            f"{os.getloadavg()[0]:.1f}.",
            "",
            *table,
            "",
            "A SendMessage runs the same dispatch as Execute (ether_host/a2a calls "
            "Dispatcher.execute), plus what A2A asks for: a Task record kept for GetTask, "
            "ListTasks and SubscribeToTask (bounded, ether_host/a2a/tasks.py), its status "
            "updates, the message's parts turned into params and the output into an artifact, "
            "and the task run in a task of its own so that it outlives the call.",
            "",
            "### Machine",
            "",
            machine_markdown(),
        ]
    )
    write_section("A2A", body)
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main("--quick" in sys.argv))
