"""The floor of a batched Pipe: the least a Python grpc.aio host can do for a batch of tasks.

A grpc.aio server with one registered handler, ``/ether.v1.AgentIOService/Pipe``. For each
PipeRequest it parses the ``inputs``, writes their ``task`` lines (orjson) to a long-running
``batch_child.py`` in one write, awaits the replies matched by id, and answers the batch with one
PipeResponse carrying every output (``data_json``). Batches of one stream are handled concurrently
(the client bounds how many tasks are in flight) and answered as each completes. No dispatcher,
deadlines, validation, logging, supervision, per-task completion order or metadata: what the
Ether host adds for a batch is what it costs above this. Prints ``{"port": N, "child": PID}``
once serving on 127.0.0.1:0; stops on SIGTERM or when stdin closes.

    python bench/echo/batch_floor.py [--loop asyncio|uvloop]
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

CHILD = Path(__file__).resolve().parent / "batch_child.py"
SUCCESS = agent_io_pb2.TASK_STATUS_SUCCESS


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
        rest = b""
        while chunk := await stdout.read(1 << 20):
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                reply = orjson.loads(line)
                future = pending.pop(reply["id"], None)
                if future is not None and not future.done():
                    future.set_result(reply)

    def send_batch(inputs: Any) -> list[asyncio.Future[dict[str, Any]]]:
        futures, lines = [], []
        for task in inputs:
            task_id = next(ids)
            futures.append(pending.setdefault(task_id, loop.create_future()))
            frame = {
                "id": task_id,
                "type": "task",
                "action": task.action,
                "params": orjson.loads(task.params_json),
            }
            lines.append(orjson.dumps(frame, option=orjson.OPT_APPEND_NEWLINE))
        stdin.write(b"".join(lines))  # the whole batch in one write
        return futures

    async def pipe(requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        answers: asyncio.Queue[agent_io_pb2.PipeResponse | None] = asyncio.Queue()
        running = 0

        async def answer(futures: list[asyncio.Future[dict[str, Any]]]) -> None:
            replies = await asyncio.gather(*futures)
            outputs = [
                agent_io_pb2.AgentOutput(status=SUCCESS, data_json=orjson.dumps(r["result"]))
                for r in replies
            ]
            answers.put_nowait(agent_io_pb2.PipeResponse(outputs=outputs))

        async def read_inputs(tg: asyncio.TaskGroup) -> None:
            nonlocal running
            async for request in requests:
                running += 1
                tg.create_task(answer(send_batch(request.inputs)))
            answers.put_nowait(None)

        reading = True
        async with asyncio.TaskGroup() as tg:  # every batch ends with the stream, never after it
            tg.create_task(read_inputs(tg))
            while reading or running:
                item = await answers.get()
                if item is None:
                    reading = False
                    continue
                running -= 1
                await context.write(item)

    reader = asyncio.ensure_future(read_replies())
    handlers = {
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
