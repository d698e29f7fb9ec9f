"""The batching suite's measuring client: one measurement in a fresh process, one JSON line out.

    python -m bench.echo.batch_client '<spec as JSON>'

``kind`` ``unary``: ``/bench.Echo/Unary`` on the bare gRPC server, the bytes of one small
ExecuteRequest echoed, ``concurrency`` calls in flight. ``kind`` ``batch``: Pipe on ``address``
(the Ether host, or the batch floor), requests of ``batch`` inputs each (``max_in_flight`` set to
``window``), at most ``window`` tasks in flight; a task counts when its output is read. Both run
``warmup`` + ``duration`` s and count what completes in the measured window.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from bench.common import CpuMeter, Sample, Window, concurrent, run_async

CALL_TIMEOUT = 30.0
SMALL_PARAMS = {"n": 1, "text": "hello"}  # a small echo task: 26 bytes of JSON


def small_input(agent: str) -> Any:
    """One small echo task, params_json in and data_json out (the API's fast path)."""
    from ether.v1 import agent_io_pb2

    return agent_io_pb2.AgentInput(
        agent=agent,
        action="echo",
        params_json=json.dumps(SMALL_PARAMS).encode(),
        output_encoding=agent_io_pb2.DATA_ENCODING_JSON,
    )


async def _unary(spec: dict[str, Any], meter: CpuMeter) -> Sample:
    import grpc

    from ether.v1 import agent_io_pb2

    payload = agent_io_pb2.ExecuteRequest(input=small_input("echo-py")).SerializeToString()
    async with grpc.aio.insecure_channel(spec["address"]) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        echo: Any = channel.unary_unary("/bench.Echo/Unary")  # bytes in, bytes out

        async def call() -> None:
            await echo(payload, timeout=CALL_TIMEOUT)

        return await concurrent(
            call,
            concurrency=spec["concurrency"],
            duration=spec["duration"],
            warmup=spec["warmup"],
            meter=meter,
        )


async def _batches(spec: dict[str, Any], meter: CpuMeter) -> Sample:
    """Batches of ``batch`` tasks written while fewer than ``window`` tasks are unanswered."""
    import grpc

    from ether.v1 import agent_io_pb2

    size, window_size = spec["batch"], spec["window"]
    one = small_input(spec["agent"])
    request = agent_io_pb2.PipeRequest(inputs=[one] * size, max_in_flight=window_size)
    success = agent_io_pb2.TASK_STATUS_SUCCESS
    window = Window()
    outstanding = 0
    room = asyncio.Event()
    room.set()
    async with grpc.aio.insecure_channel(spec["address"]) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        pipe = channel.stream_stream(
            "/ether.v1.AgentIOService/Pipe",
            request_serializer=agent_io_pb2.PipeRequest.SerializeToString,
            response_deserializer=agent_io_pb2.PipeResponse.FromString,
        )
        call = pipe(timeout=spec["warmup"] + spec["duration"] + CALL_TIMEOUT)

        async def writer() -> None:
            nonlocal outstanding
            while True:
                while outstanding + size > window_size and not window.stopping:
                    room.clear()
                    await room.wait()
                if window.stopping:
                    break
                outstanding += size
                await call.write(request)
            await call.done_writing()

        async def reader() -> None:
            nonlocal outstanding
            while (reply := await call.read()) is not grpc.aio.EOF:
                outputs = reply.outputs  # type: ignore[attr-defined] # a PipeResponse
                outstanding -= len(outputs)
                room.set()
                if window.counting:
                    window.calls += len(outputs)
                    bad = [o for o in outputs if o.status != success]
                    if bad:
                        window.error(RuntimeError(f"task failed: {bad[0].error}"))

        tasks = [asyncio.ensure_future(writer()), asyncio.ensure_future(reader())]
        await asyncio.sleep(spec["warmup"])
        meter.start()
        started = time.perf_counter()
        window.measuring = True
        await asyncio.sleep(spec["duration"])
        window.stopping = True
        elapsed = time.perf_counter() - started
        cpu = meter.stop()
        room.set()  # wake the writer so it sees "stopping" and half-closes
        done, pending = await asyncio.wait(tasks, timeout=15)
        for task in pending:
            task.cancel()
        if pending:
            call.cancel()
    failures = [repr(t.exception())[:300] for t in done if t.exception()]
    first_error = window.first_error or (failures[0] if failures else "")
    return Sample(window.calls, elapsed, [], window.errors + len(failures), first_error, cpu)


def main(spec: dict[str, Any]) -> None:
    pids = {role: pid for role, pid in spec.get("pids", {}).items() if pid}
    meter = CpuMeter(pids=pids | {"client": os.getpid()}, ours=list(spec.get("ours", [])))
    measure = _unary if spec["kind"] == "unary" else _batches
    sample = run_async(measure(spec, meter))
    print(json.dumps(sample.as_dict()), flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
