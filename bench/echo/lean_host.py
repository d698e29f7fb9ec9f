"""The floor of Ether's design: the least a Python host can do for Execute and Pipe, and nothing more.

A grpc.aio server with two registered handlers. ``/ether.v1.AgentIOService/Execute`` parses the
ExecuteRequest, writes one ``task`` line (orjson) to a long-running ``stdio_child.py``, awaits
the reply matched by id, and answers ``data_json``. ``Pipe`` does the same for each PipeRequest
of a bidi stream and writes each output as its reply arrives (the client bounds how many are in
flight). No dispatcher, deadlines, validation, logging, supervision or metadata: what the Ether
host adds is what it costs above this. Prints
``{"port": N, "child": PID}`` once serving on 127.0.0.1:0; stops on SIGTERM or when stdin closes.

    python bench/echo/lean_host.py [--loop asyncio|uvloop]
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import grpc
import orjson
from serving import (  # bench/echo/serving.py: run as a script, its folder is on sys.path
    like_the_host,
    main,
    stopped,
)

from ether.v1 import agent_io_pb2

CHILD = Path(__file__).resolve().parent / "stdio_child.py"


async def serve() -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=16 * 1024 * 1024,
    )
    assert child.stdin is not None and child.stdout is not None
    stdin, stdout = child.stdin, child.stdout
    loop = asyncio.get_running_loop()
    pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
    ids = itertools.count()

    async def read_replies() -> None:
        while line := await stdout.readline():
            reply = orjson.loads(line)
            future = pending.pop(reply["id"], None)
            if future is not None and not future.done():
                future.set_result(reply)

    def send_task(task: agent_io_pb2.AgentInput) -> asyncio.Future[dict[str, Any]]:
        task_id = next(ids)
        future = pending[task_id] = loop.create_future()
        frame = {
            "id": task_id,
            "type": "task",
            "action": task.action,
            "params": orjson.loads(task.params_json),
        }
        stdin.write(orjson.dumps(frame, option=orjson.OPT_APPEND_NEWLINE))
        return future

    def output(reply: dict[str, Any]) -> agent_io_pb2.AgentOutput:
        return agent_io_pb2.AgentOutput(
            status=agent_io_pb2.TASK_STATUS_SUCCESS, data_json=orjson.dumps(reply["result"])
        )

    async def execute(
        request: agent_io_pb2.ExecuteRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> agent_io_pb2.ExecuteResponse:
        reply = await send_task(request.input)
        return agent_io_pb2.ExecuteResponse(output=output(reply))

    async def pipe(requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        finished: asyncio.Queue[agent_io_pb2.AgentOutput | None] = asyncio.Queue()
        running = 0

        def on_reply(future: asyncio.Future[dict[str, Any]]) -> None:
            finished.put_nowait(output(future.result()))

        async def read_inputs() -> None:
            nonlocal running
            async for request in requests:
                running += 1
                send_task(request.input).add_done_callback(on_reply)
            finished.put_nowait(None)

        reading = True
        async with asyncio.TaskGroup() as tg:  # the reader ends with the stream, never after it
            tg.create_task(read_inputs())
            while reading or running:
                item = await finished.get()
                if item is None:
                    reading = False
                    continue
                running -= 1
                await context.write(agent_io_pb2.PipeResponse(output=item))

    reader = asyncio.ensure_future(read_replies())
    handlers = {
        "Execute": grpc.unary_unary_rpc_method_handler(
            execute,
            request_deserializer=agent_io_pb2.ExecuteRequest.FromString,
            response_serializer=agent_io_pb2.ExecuteResponse.SerializeToString,
        ),
        "Pipe": grpc.stream_stream_rpc_method_handler(
            pipe,
            request_deserializer=agent_io_pb2.PipeRequest.FromString,
            response_serializer=agent_io_pb2.PipeResponse.SerializeToString,
        ),
    }
    server = grpc.aio.server()
    server.add_registered_method_handlers("ether.v1.AgentIOService", handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    like_the_host()
    print(json.dumps({"port": port, "child": child.pid}), flush=True)

    await stopped()
    await server.stop(0.5)
    stdin.close()
    await child.wait()
    reader.cancel()


if __name__ == "__main__":
    main(__doc__.splitlines()[0], serve)
