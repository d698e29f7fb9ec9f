"""The measuring client: one measurement in a fresh process, printed as one JSON line on stdout.

    python -m bench.echo.client '<spec as JSON>'

The harness (``bench/agents.py``) starts one per measured run, so it stays idle itself. The spec
names the ``kind`` of target and the loop ``mode``:

- ``unary``: Execute on the host (``agent`` set) or ``/bench.Echo/Unary`` on the bare server;
- ``stream``: Pipe on the host (``agent`` set) or ``/bench.Echo/Stream``, kept at ``concurrency``
  messages in flight;
- ``stdio``: the asyncio parent of the bare stdio baseline (it starts ``stdio_child.py``);
- ``mcp``: the MCP SDK's client calling ``mcp/server.py``'s echo tool;

``mode`` ``seq`` makes ``count`` calls one after another after ``warmup`` calls (at most
``time_limit`` s); ``conc`` keeps ``concurrency`` calls in flight for ``warmup`` + ``duration`` s.
``pids`` are the processes whose CPU to report by role, ``ours`` the other processes of the run.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import (
    PYTHON,
    CpuMeter,
    Sample,
    Window,
    children_of,
    concurrent,
    run_async,
    sequential,
)
from bench.common import Call as CallFn

HERE = Path(__file__).resolve().parent
CALL_TIMEOUT = 30.0

# ~1 KB of JSON (985 bytes compact; 1,218 bytes as an ExecuteRequest), mixed types like real params.
PARAMS: dict[str, Any] = {
    "task": "summarize the findings of the last scan",
    "path": "/srv/projects/ether/examples/agents/scout",
    "options": {"depth": 3, "follow_links": False, "max_files": 200, "languages": ["py", "go"]},
    "tags": ["bench", "echo", "payload", "one-kilobyte"],
    "findings": [
        {
            "file": f"src/module_{i:02d}.py",
            "line": 10 * i + 3,
            "severity": "info",
            "note": "too long",
        }
        for i in range(10)
    ],
}


def execute_request(agent: str, encoding: str = "json", as_text: bool = False) -> Any:
    """The ExecuteRequest an Ether run sends. ``json``: params_json in, data_json out (the API's
    fast path); ``struct``: params as a Struct in, data as a Value out (what grpcurl uses). The
    bare gRPC runs echo the bytes of the ``struct`` request, the larger of the two. ``as_text``:
    the params JSON-encoded into ``{"text": ...}``, the MCP echo tool's argument (bench/mcp.py)."""
    from google.protobuf import struct_pb2

    from ether.v1 import agent_io_pb2

    params: dict[str, Any] = {"text": json.dumps(PARAMS)} if as_text else PARAMS
    if encoding == "json":
        task = agent_io_pb2.AgentInput(
            agent=agent,
            action="echo",
            params_json=json.dumps(params).encode(),
            output_encoding=agent_io_pb2.DATA_ENCODING_JSON,
        )
        return agent_io_pb2.ExecuteRequest(input=task)
    struct = struct_pb2.Struct()
    struct.update(params)
    task = agent_io_pb2.AgentInput(agent=agent, action="echo", params=struct)
    return agent_io_pb2.ExecuteRequest(input=task)


async def _loop(spec: dict[str, Any], call: CallFn, meter: CpuMeter) -> Sample:
    if spec["mode"] == "seq":
        limit = spec["time_limit"]
        return await sequential(
            call, count=spec["count"], warmup=spec["warmup"], time_limit=limit, meter=meter
        )
    n, seconds, warmup = spec["concurrency"], spec["duration"], spec["warmup"]
    return await concurrent(call, concurrency=n, duration=seconds, warmup=warmup, meter=meter)


async def _unary(spec: dict[str, Any], meter: CpuMeter) -> Sample:
    import grpc

    from ether.v1 import agent_io_pb2

    encoding = spec.get("encoding", "json") if spec["agent"] else "struct"
    request = execute_request(spec.get("agent") or "echo-py", encoding, spec.get("as_text", False))
    async with grpc.aio.insecure_channel(spec["address"]) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        if spec["kind"] == "stream":
            return await _stream(spec, channel, request, meter)
        if spec["agent"]:
            execute = channel.unary_unary(
                "/ether.v1.AgentIOService/Execute",
                request_serializer=agent_io_pb2.ExecuteRequest.SerializeToString,
                response_deserializer=agent_io_pb2.ExecuteResponse.FromString,
            )
            success = agent_io_pb2.TASK_STATUS_SUCCESS

            async def call() -> None:
                output = (await execute(request, timeout=CALL_TIMEOUT)).output
                if output.status != success:
                    raise RuntimeError(f"task failed: {output.error.code}: {output.error.message}")

        else:
            echo: Any = channel.unary_unary("/bench.Echo/Unary")  # bytes in, bytes out
            payload = request.SerializeToString()

            async def call() -> None:
                await echo(payload, timeout=CALL_TIMEOUT)

        return await _loop(spec, call, meter)


async def _stream(spec: dict[str, Any], channel: Any, request: Any, meter: CpuMeter) -> Sample:
    """A bidi stream kept at ``concurrency`` messages in flight; counts replies in the window."""
    import grpc

    from ether.v1 import agent_io_pb2

    if spec["agent"]:
        open_call = channel.stream_stream(
            "/ether.v1.AgentIOService/Pipe",
            request_serializer=agent_io_pb2.PipeRequest.SerializeToString,
            response_deserializer=agent_io_pb2.PipeResponse.FromString,
        )
        message: Any = agent_io_pb2.PipeRequest(
            input=request.input, max_in_flight=spec["concurrency"]
        )
        success = agent_io_pb2.TASK_STATUS_SUCCESS

        def ok(reply: Any) -> bool:
            return bool(reply.output.status == success)

    else:
        open_call = channel.stream_stream("/bench.Echo/Stream")
        message = request.SerializeToString()

        def ok(reply: Any) -> bool:
            return len(reply) == len(message)

    call = open_call(timeout=spec["warmup"] + spec["duration"] + CALL_TIMEOUT)
    slots = asyncio.Semaphore(spec["concurrency"])
    window = Window()

    async def writer() -> None:
        while True:
            await slots.acquire()
            if window.stopping:
                break
            await call.write(message)
        await call.done_writing()

    async def reader() -> None:
        while (reply := await call.read()) is not grpc.aio.EOF:
            slots.release()
            if window.counting:
                window.calls += 1
                if not ok(reply):
                    window.error(RuntimeError(f"bad reply: {str(reply)[:200]}"))

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


async def _stdio(spec: dict[str, Any], meter: CpuMeter) -> Sample:
    """The asyncio parent of the bare stdio baseline: a reader task resolves futures by id."""
    child = await asyncio.create_subprocess_exec(
        PYTHON,
        str(HERE / "stdio_child.py"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        limit=16 * 1024 * 1024,
    )
    assert child.stdin is not None and child.stdout is not None
    stdin, stdout = child.stdin, child.stdout
    meter.pids["child"] = child.pid
    loop = asyncio.get_running_loop()
    pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
    ids = itertools.count()

    async def read() -> None:
        while line := await stdout.readline():
            message = json.loads(line)
            future = pending.pop(message["id"], None)
            if future is not None and not future.done():
                future.set_result(message)

    async def call() -> None:
        task_id = next(ids)
        future = pending[task_id] = loop.create_future()
        frame = {"id": task_id, "type": "task", "action": "echo", "params": PARAMS}
        stdin.write(json.dumps(frame).encode() + b"\n")
        reply = await future
        if reply["status"] != "ok":
            raise RuntimeError(f"child answered {reply['status']}")

    reader = asyncio.ensure_future(read())
    try:
        return await _loop(spec, call, meter)
    finally:
        stdin.close()
        try:
            await asyncio.wait_for(child.wait(), 10)
        except TimeoutError:
            child.kill()
            await child.wait()
        reader.cancel()


async def _mcp(spec: dict[str, Any], meter: CpuMeter) -> Sample:
    """The MCP SDK's own client calling the echo tool of an MCP SDK server over stdio."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    text = json.dumps(PARAMS)
    server = StdioServerParameters(command=PYTHON, args=[str(HERE / "mcp" / "server.py")])
    opened = time.perf_counter()
    async with Client(server) as client:
        open_s = time.perf_counter() - opened
        spawned = children_of(os.getpid())
        if spawned:
            meter.pids["server"] = spawned[0]

        async def call() -> None:
            result = await client.call_tool("echo", {"text": text})
            if result.is_error:
                raise RuntimeError(f"tool error: {result.content}")

        sample = await _loop(spec, call, meter)
    sample.cpu["open_s"] = open_s
    return sample


def main(spec: dict[str, Any]) -> None:
    # The stdio child and the MCP server join meter.pids once started: ours, never foreign load.
    pids = {role: pid for role, pid in spec.get("pids", {}).items() if pid}
    meter = CpuMeter(pids=pids | {"client": os.getpid()}, ours=list(spec.get("ours", [])))
    if spec["kind"] == "stdio":
        sample = run_async(_stdio(spec, meter), spec.get("loop", "asyncio"))
    elif spec["kind"] == "mcp":
        sample = run_async(_mcp(spec, meter))
    else:
        sample = run_async(_unary(spec, meter))
    print(json.dumps(sample.as_dict()), flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
