"""The batching suite's measuring client: one measurement in a fresh process, one JSON line out.

    python -m bench.echo.batch_client '<spec as JSON>'

``kind`` ``unary``: ``/bench.Echo/Unary`` on the bare gRPC server, the bytes of one small
ExecuteRequest echoed, ``concurrency`` calls in flight. ``kind`` ``batch``: Pipe on ``address``
(the Ether host, or the batch floor), requests of ``batch`` inputs each (``max_in_flight`` set to
``window``), at most ``window`` tasks in flight; a task counts when its output is read. Both run
``warmup`` + ``duration`` s and count what completes in the measured window.

For bench/ceiling.py, two more kinds on the Ether host with the same small task: ``execute``
(Execute, ``concurrency`` calls in flight) and ``pipe`` (Pipe with one ``input`` per message,
``concurrency`` messages in flight).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import TICK, CpuMeter, Sample, Window, concurrent, run_async

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


async def _execute(spec: dict[str, Any], meter: CpuMeter) -> Sample:
    """Execute of the small task, ``concurrency`` calls in flight."""
    import grpc

    from ether.v1 import agent_io_pb2

    request = agent_io_pb2.ExecuteRequest(input=small_input(spec["agent"]))
    success = agent_io_pb2.TASK_STATUS_SUCCESS
    async with grpc.aio.insecure_channel(spec["address"]) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        execute = channel.unary_unary(
            "/ether.v1.AgentIOService/Execute",
            request_serializer=agent_io_pb2.ExecuteRequest.SerializeToString,
            response_deserializer=agent_io_pb2.ExecuteResponse.FromString,
        )

        async def call() -> None:
            output = (await execute(request, timeout=CALL_TIMEOUT)).output
            if output.status != success:
                raise RuntimeError(f"task failed: {output.error.code}: {output.error.message}")

        return await concurrent(
            call,
            concurrency=spec["concurrency"],
            duration=spec["duration"],
            warmup=spec["warmup"],
            meter=meter,
        )


async def _pipe_one_each(spec: dict[str, Any], meter: CpuMeter) -> Sample:
    """Pipe with one ``input`` per message, ``concurrency`` messages in flight: a batch of one
    is the same loop as ``_batches``."""
    import grpc

    from ether.v1 import agent_io_pb2

    one = small_input(spec["agent"])
    window_size = spec["concurrency"]
    request = agent_io_pb2.PipeRequest(input=one, max_in_flight=window_size)
    success = agent_io_pb2.TASK_STATUS_SUCCESS
    window = Window()
    slots = asyncio.Semaphore(window_size)
    async with grpc.aio.insecure_channel(spec["address"]) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        pipe = channel.stream_stream(
            "/ether.v1.AgentIOService/Pipe",
            request_serializer=agent_io_pb2.PipeRequest.SerializeToString,
            response_deserializer=agent_io_pb2.PipeResponse.FromString,
        )
        call = pipe(timeout=spec["warmup"] + spec["duration"] + CALL_TIMEOUT)

        async def writer() -> None:
            while True:
                await slots.acquire()
                if window.stopping:
                    break
                await call.write(request)
            await call.done_writing()

        async def reader() -> None:
            while (reply := await call.read()) is not grpc.aio.EOF:
                slots.release()
                if window.counting:
                    window.calls += 1
                    output = reply.output  # type: ignore[attr-defined] # a PipeResponse
                    if output.status != success:
                        window.error(RuntimeError(f"task failed: {output.error}"))

        tasks = [asyncio.ensure_future(writer()), asyncio.ensure_future(reader())]
        await asyncio.sleep(spec["warmup"])
        meter.start()
        started = time.perf_counter()
        window.measuring = True
        await asyncio.sleep(spec["duration"])
        window.stopping = True
        elapsed = time.perf_counter() - started
        cpu = meter.stop()
        slots.release()  # wake the writer so it sees "stopping" and half-closes
        done, pending = await asyncio.wait(tasks, timeout=15)
        for task in pending:
            task.cancel()
        if pending:
            call.cancel()
    failures = [repr(t.exception())[:300] for t in done if t.exception()]
    first_error = window.first_error or (failures[0] if failures else "")
    return Sample(window.calls, elapsed, [], window.errors + len(failures), first_error, cpu)


KINDS = {"unary": _unary, "batch": _batches, "execute": _execute, "pipe": _pipe_one_each}


def main_thread_cpu(pid: int) -> float:
    """CPU seconds (utime + stime, clock ticks) the main thread of ``pid`` has used so far."""
    raw = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # fields 14 and 15 of stat(5)


@dataclass
class MainThreadMeter(CpuMeter):
    """CpuMeter that also reports, as ``main_cpu_s``, the CPU of the main thread of each process
    in ``main_threads`` over the same window (a Python host's main thread bounds its rate)."""

    main_threads: dict[str, int] = field(default_factory=dict)
    _main_start: dict[str, float] = field(default_factory=dict)

    def start(self) -> None:
        self._main_start = {n: main_thread_cpu(p) for n, p in self.main_threads.items()}
        super().start()

    def stop(self) -> dict[str, Any]:
        result = super().stop()
        result["main_cpu_s"] = {
            n: main_thread_cpu(p) - self._main_start[n] for n, p in self.main_threads.items()
        }
        return result


def main(spec: dict[str, Any]) -> None:
    pids = {role: pid for role, pid in spec.get("pids", {}).items() if pid}
    meter = MainThreadMeter(
        pids=pids | {"client": os.getpid()},
        ours=list(spec.get("ours", [])),
        main_threads=spec.get("main_threads", {}),
    )
    measure = KINDS[spec["kind"]]
    sample = run_async(measure(spec, meter))
    print(json.dumps(sample.as_dict()), flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
