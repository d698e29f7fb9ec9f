"""A tour of AgentIOService from Python: the directory, a call, a streamed call, a pipe, an error.

    .venv/bin/python clients/examples/python/tour.py --address 127.0.0.1:50051 --path .

It talks to a host serving the example agents (`make run`) through the generated stubs of the
`ether-client` distribution (clients/python), with grpcio's blocking API. The Go and TypeScript
tours beside it do the same steps and print the same lines. ETHER_TOKEN, when set, is sent as
a bearer token (a host started with an auth tokens file asks for one). ETHER_TLS_CA, when set,
makes the tour connect with TLS, trusting the host's certificate if that CA signed it, and
ETHER_TLS_CLIENT_CERT with ETHER_TLS_CLIENT_KEY present a client certificate (docs/auth.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2

from ether.v1 import agent_io_pb2, agent_io_pb2_grpc

DEADLINE = 30.0  # seconds; the host passes what is left of it on to the agent


def connect(address: str) -> grpc.Channel:
    """Plaintext, or TLS (with a client certificate) as the ETHER_TLS_* variables say."""
    ca = os.environ.get("ETHER_TLS_CA")
    if not ca:
        return grpc.insecure_channel(address)
    cert, key = os.environ.get("ETHER_TLS_CLIENT_CERT"), os.environ.get("ETHER_TLS_CLIENT_KEY")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=Path(ca).read_bytes(),
        private_key=Path(key).read_bytes() if key else None,
        certificate_chain=Path(cert).read_bytes() if cert else None,
    )
    return grpc.secure_channel(address, credentials)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--path", default=".", help="the folder whose files scout reads")
    args = parser.parse_args()
    root = Path(args.path).resolve()
    token = os.environ.get("ETHER_TOKEN")
    metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()

    with connect(args.address) as channel:
        agents = agent_io_pb2_grpc.AgentIOServiceStub(channel)

        # 1. The directory, page by page: a host may hold more agents than one page.
        names: list[str] = []
        request = agent_io_pb2.ListAgentsRequest()
        while True:
            page = agents.ListAgents(request, timeout=DEADLINE, metadata=metadata)
            names += [agent.name for agent in page.agents]
            if not page.next_page_token:
                break
            request.page_token = page.next_page_token
        print("agents: " + ", ".join(names))

        # 2. One call. A task that fails inside the agent is an AgentOutput with status ERROR,
        # not an RPC error: the RPC fails only when the host could not run the task at all.
        output = agents.Execute(
            agent_io_pb2.ExecuteRequest(
                input=task("analyze_file", {"path": str(root / "README.md")})
            ),
            timeout=DEADLINE,
            metadata=metadata,
        ).output
        data = value_of(succeeded(output, "analyze_file"))
        print(f"analyze_file: {status(output)} lines={data['lines']} pid={output.metadata.pid}")

        # 3. A streamed call: started, progress and log events as they happen, then the output.
        search = {"path": str(root / "server"), "pattern": "class .*Servicer", "glob": "*.py"}
        stream = agents.ExecuteStream(
            agent_io_pb2.ExecuteStreamRequest(input=task("search_content", search)),
            timeout=DEADLINE,
            metadata=metadata,
        )
        for event in stream:
            kind = event.WhichOneof("event")
            if kind == "started":
                line = f"started pid={event.started.pid}"
            elif kind == "progress":
                line = f"progress {event.progress.progress:.0f}/{event.progress.total:.0f}"
            elif kind == "log":
                line = f"log {event.log.level} {event.log.message}"
            else:
                found = value_of(succeeded(event.output, "search_content"))
                line = f"output {status(event.output)} count={found['count']}"
            print(f"stream {event.sequence}: {line}")

        # 4. A pipe: many tasks over one stream, outputs in the order they finish.
        files = ["README.md", "Makefile", "pyproject.toml"]

        def inputs() -> Iterator[agent_io_pb2.PipeRequest]:
            for name in files:
                yield agent_io_pb2.PipeRequest(
                    input=task("analyze_file", {"path": str(root / name)})
                )

        outputs = [
            (value_of(succeeded(response.output, "pipe")), status(response.output))
            for response in agents.Pipe(inputs(), timeout=DEADLINE, metadata=metadata)
        ]
        for data, state in sorted(outputs, key=lambda pair: Path(pair[0]["path"]).name):
            print(f"pipe: {Path(data['path']).name} {state} lines={data['lines']}")

        # 4b. A batch: the same tasks in one request (inputs), answered in responses that each
        # carry every output finished since the previous one (outputs), still in the order
        # they finish. Each task runs and fails on its own; max_in_flight counts tasks.
        batch = agent_io_pb2.PipeRequest(
            inputs=[task("analyze_file", {"path": str(root / name)}) for name in files]
        )
        batched = [
            (value_of(succeeded(output, "batch")), status(output))
            for response in agents.Pipe(iter([batch]), timeout=DEADLINE, metadata=metadata)
            for output in response.outputs
        ]
        for data, state in sorted(batched, key=lambda pair: Path(pair[0]["path"]).name):
            print(f"batch: {Path(data['path']).name} {state} lines={data['lines']}")

        # 5. An agent that is not there: NOT_FOUND, with a message saying which.
        try:
            agents.Execute(
                agent_io_pb2.ExecuteRequest(
                    input=agent_io_pb2.AgentInput(agent="no-such-agent", action="anything")
                ),
                timeout=DEADLINE,
                metadata=metadata,
            )
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise  # any other failure is the tour's, not the answer it shows
            print(f"missing agent: {error.code().name}: {error.details()}")
        else:
            raise TourFailed("missing agent: the call succeeded")
    return 0


def task(action: str, params: dict[str, Any]) -> agent_io_pb2.AgentInput:
    struct = struct_pb2.Struct()
    struct.update(params)
    return agent_io_pb2.AgentInput(agent="scout", action=action, params=struct)


def value_of(value: struct_pb2.Value) -> Any:
    """The output's data as plain Python (numbers come back as floats: JSON has no ints)."""
    data = json_format.MessageToDict(value)
    return {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in data.items()}


class TourFailed(Exception):
    """A step did not go as the tour expects (the message says which)."""


def succeeded(output: agent_io_pb2.AgentOutput, step: str) -> struct_pb2.Value:
    """The output's data when the task succeeded; a task that failed in the agent says why."""
    if output.status != agent_io_pb2.TASK_STATUS_SUCCESS:
        raise TourFailed(
            f"{step}: task {status(output)}: {output.error.code}: {output.error.message}"
        )
    return output.data


def status(output: agent_io_pb2.AgentOutput) -> str:
    return agent_io_pb2.TaskStatus.Name(output.status).removeprefix("TASK_STATUS_")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except grpc.RpcError as failed:
        print(f"tour: {failed.code().name}: {failed.details()}", file=sys.stderr)
        sys.exit(1)
    except TourFailed as failed:
        print(f"tour: {failed}", file=sys.stderr)
        sys.exit(1)
