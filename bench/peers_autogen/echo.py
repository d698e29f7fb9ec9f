"""The AutoGen gRPC worker runtime's side of bench/peers.py, run by the throwaway venv's python.

    python -m bench.peers_autogen.echo host            # prints {"address": ...} once serving
    python -m bench.peers_autogen.echo worker ADDRESS  # prints {"ready": true} once registered
    python -m bench.peers_autogen.echo caller SPEC     # one measurement, one JSON line

The smallest faithful echo, written as AutoGen's distributed-runtime guide does it: the host is
``GrpcWorkerAgentRuntimeHost``; the worker is a ``GrpcWorkerAgentRuntime`` with one
``RoutedAgent`` whose handler returns the message it got; the caller is another
``GrpcWorkerAgentRuntime`` that ``send_message``-s the benchmark's ~1 KB params
(``bench.echo.client.PARAMS``) to ``AgentId("echo", "default")`` and awaits each reply. A call
thus goes caller -> host -> worker -> host -> caller, as a message to a remote agent does.

SPEC is bench/echo/client.py's: ``mode`` ``seq`` (``count``, ``warmup``, ``time_limit``) or
``conc`` (``concurrency``, ``duration``, ``warmup``), and ``pids`` whose CPU to report by role.
The loops are bench.common's (stdlib only, imported through PYTHONPATH), so both sides of a ratio
are timed by the same code.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from dataclasses import dataclass
from typing import Any

from autogen_core import (
    AgentId,
    MessageContext,
    RoutedAgent,
    message_handler,
    try_get_known_serializers_for_type,
)
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime, GrpcWorkerAgentRuntimeHost

from bench.common import LOCAL, CpuMeter, Sample, concurrent, sequential
from bench.echo.client import PARAMS

AGENT_TYPE = "echo"
READY_TIMEOUT = 30.0


@dataclass
class Echo:
    """The message both ways: the params as a JSON object (AutoGen's dataclass JSON serializer)."""

    params: dict[str, Any]


class EchoAgent(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("Benchmark echo agent: returns the message it gets.")

    @message_handler
    async def on_echo(self, message: Echo, ctx: MessageContext) -> Echo:
        return message


def _say(value: dict[str, Any]) -> None:
    print(json.dumps(value), flush=True)


def _free_port() -> int:
    # GrpcWorkerAgentRuntimeHost does not report the port it bound, so pick one first; the moment
    # between closing this socket and the host binding it is the only race, on loopback.
    with socket.socket() as probe:
        probe.bind((LOCAL, 0))
        return int(probe.getsockname()[1])


async def _host() -> None:
    import grpc

    address = f"{LOCAL}:{_free_port()}"
    host = GrpcWorkerAgentRuntimeHost(address=address)
    host.start()
    async with grpc.aio.insecure_channel(address) as channel:
        await asyncio.wait_for(channel.channel_ready(), READY_TIMEOUT)
    _say({"address": address, "pid": os.getpid()})
    await host.stop_when_signal(grace=1)


async def _worker(address: str) -> None:
    runtime = GrpcWorkerAgentRuntime(host_address=address)
    await runtime.start()
    await EchoAgent.register(runtime, AGENT_TYPE, EchoAgent)
    _say({"ready": True, "pid": os.getpid()})
    await runtime.stop_when_signal()


async def _caller(spec: dict[str, Any], meter: CpuMeter) -> Sample:
    runtime = GrpcWorkerAgentRuntime(host_address=spec["address"])
    runtime.add_message_serializer(try_get_known_serializers_for_type(Echo))
    await runtime.start()
    recipient = AgentId(AGENT_TYPE, "default")
    message = Echo(params=PARAMS)

    async def call() -> None:
        reply = await runtime.send_message(message, recipient)
        if not isinstance(reply, Echo) or reply.params != PARAMS:
            raise RuntimeError(f"bad reply: {str(reply)[:200]}")

    try:
        if spec["mode"] == "seq":
            return await sequential(
                call,
                count=spec["count"],
                warmup=spec["warmup"],
                time_limit=spec["time_limit"],
                meter=meter,
            )
        return await concurrent(
            call,
            concurrency=spec["concurrency"],
            duration=spec["duration"],
            warmup=spec["warmup"],
            meter=meter,
        )
    finally:
        await runtime.stop()


def main(argv: list[str]) -> None:
    role = argv[0] if argv else ""
    if role == "host":
        asyncio.run(_host())
    elif role == "worker" and len(argv) == 2:
        asyncio.run(_worker(argv[1]))
    elif role == "caller" and len(argv) == 2:
        spec = json.loads(argv[1])
        pids = {name: pid for name, pid in spec.get("pids", {}).items() if pid}
        meter = CpuMeter(pids=pids | {"client": os.getpid()}, ours=list(spec.get("ours", [])))
        _say(asyncio.run(_caller(spec, meter)).as_dict())
    else:
        sys.exit("usage: python -m bench.peers_autogen.echo host | worker ADDRESS | caller SPEC")


if __name__ == "__main__":
    main(sys.argv[1:])
