"""``ether agents list|show|deploy|start|stop|restart|scale|remove|ps|logs``: the agent
directory and the supervisor from a shell, for what would otherwise be a grpcurl line of JSON.

``deploy``, ``start``, ``restart`` and ``scale`` wait until every replica runs (exit 0) or one
cannot (exit 1, with the reason and its last stderr lines). ``list`` and ``ps`` print a table, or
a JSON array with ``-o json``; ``logs -o json`` prints one JSON object per line. Every command
exits 2 for a request the host refuses as invalid and 4 when the host cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ether_host.cli.client import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    add_output_argument,
    command_group,
    connect,
    enum_name,
    every_page,
    print_json,
    print_table,
    report_rpc_error,
)

SETTLED = {"RUNNING", "FATAL", "EXITED", "STOPPED"}


def add_parser(commands: Any) -> None:
    """Register ``agents`` and its subcommands on the ``ether`` command's subparsers."""
    sub = command_group(
        commands, "agents", "list, deploy, scale and watch agents", dest="agents_command"
    )
    listing = sub("list", "the agents, their state, load and actions")
    listing.add_argument("--capability", default="", help="only agents offering this")
    listing.add_argument("--json", action="store_true", help="print ListAgents' answer as JSON")
    add_output_argument(listing)
    sub("show", "one agent with its actions and their params schemas, as JSON").add_argument("name")
    deploy = sub("deploy", "deploy an agent folder and wait until it runs")
    deploy.add_argument("path", help="the agent folder (agent.toml in it sets the rest)")
    deploy.add_argument("--name", default="", help="default: agent.toml's, then the folder's")
    deploy.add_argument("--replicas", type=int, default=0, help="processes, 1 to 64")
    deploy.add_argument(
        "--restart", choices=("always", "on-failure", "never"), default=None, help="restart policy"
    )
    deploy.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="repeatable"
    )
    for verb in ("stop", "remove"):
        sub(verb, f"{verb} an agent (every replica)").add_argument("name")
    start = sub("start", "start an agent and wait until every replica runs")
    restart = sub("restart", "stop then start an agent, and wait until every replica runs")
    scale = sub("scale", "run this many replicas of an agent, and wait until they run")
    for parser in (start, restart, scale):
        parser.add_argument("name")
    scale.add_argument("replicas", type=int)
    for parser in (deploy, start, restart, scale):
        parser.add_argument("--no-wait", action="store_true", help="do not wait for it to run")
        parser.add_argument(
            "--wait-timeout", type=float, default=600.0, help="seconds to wait (default 600)"
        )
    ps = sub("ps", "the agents' processes, one line per replica")
    ps.add_argument("name", nargs="?", default="")
    add_output_argument(ps)
    logs = sub("logs", "an agent's log lines (stderr, log frames, install output)")
    logs.add_argument("name")
    logs.add_argument("-n", "--tail", type=int, default=100, help="lines from before (default 100)")
    logs.add_argument("-f", "--follow", action="store_true", help="then follow new lines")
    logs.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="text (default) or json: one JSON object per line, every field",
    )


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Entry point of ``ether agents ...``."""
    import grpc  # imported late: `ether --help` should not load grpc

    from ether.v1 import agent_io_pb2_grpc, supervisor_pb2_grpc

    channel, metadata = connect(args)
    agents = agent_io_pb2_grpc.AgentIOServiceStub(channel)
    supervisor = supervisor_pb2_grpc.SupervisorServiceStub(channel)
    try:
        command = _COMMANDS[args.agents_command]
        return command(args, agents, supervisor, metadata, out, err)
    except grpc.RpcError as error:
        return report_rpc_error(error, err, f"ether agents {args.agents_command}")
    except KeyboardInterrupt:
        return EXIT_OK if args.agents_command == "logs" else 130
    finally:
        channel.close()


def _list(args: argparse.Namespace, agents: Any, _sup: Any, md: Any, out: TextIO, _e: Any) -> int:
    from google.protobuf import json_format

    from ether.v1 import agent_io_pb2, common_pb2

    request = agent_io_pb2.ListAgentsRequest(capability=args.capability)
    found = every_page(agents.ListAgents, request, "agents", md)
    if args.output == "json":
        print_json(found, out)
        return EXIT_OK
    if args.json:
        listed = agent_io_pb2.ListAgentsResponse(agents=found)
        out.write(json_format.MessageToJson(listed, indent=2) + "\n")
        return EXIT_OK
    rows = [
        [
            a.name,
            enum_name(common_pb2.Language, a.language),
            enum_name(agent_io_pb2.AgentState, a.state),
            f"{a.ready_replicas}/{a.replicas}",
            str(a.in_flight),
            str(a.queued),
            ", ".join(action.name for action in a.actions),
        ]
        for a in found
    ]
    print_table(["NAME", "LANGUAGE", "STATE", "READY", "IN FLIGHT", "QUEUED", "ACTIONS"], rows, out)
    return EXIT_OK


def _show(args: argparse.Namespace, agents: Any, _sup: Any, md: Any, out: TextIO, _e: Any) -> int:
    from google.protobuf import json_format

    from ether.v1 import agent_io_pb2

    agent = agents.GetAgent(
        agent_io_pb2.GetAgentRequest(name=args.name), timeout=30, metadata=md
    ).agent
    out.write(json_format.MessageToJson(agent, indent=2) + "\n")
    return EXIT_OK


def _deploy(args: argparse.Namespace, _a: Any, sup: Any, md: Any, out: TextIO, err: TextIO) -> int:
    from ether.v1 import supervisor_pb2

    env = {}
    for pair in args.env:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            print(f"ether agents deploy: --env {pair!r} is not KEY=VALUE", file=err)
            return EXIT_USAGE
        env[key] = value
    restart = {
        None: supervisor_pb2.RESTART_POLICY_UNSPECIFIED,
        "always": supervisor_pb2.RESTART_POLICY_ALWAYS,
        "on-failure": supervisor_pb2.RESTART_POLICY_ON_FAILURE,
        "never": supervisor_pb2.RESTART_POLICY_NEVER,
    }[args.restart]
    spec = supervisor_pb2.AgentSpec(
        path=str(Path(args.path).absolute()),
        name=args.name,
        replicas=args.replicas,
        restart=restart,
        env=env,
    )
    status = sup.DeployAgent(
        supervisor_pb2.DeployAgentRequest(spec=spec), timeout=60, metadata=md
    ).agent
    if args.no_wait:
        print(status.info.name, file=out)
        return EXIT_OK
    return _wait_ready(sup, md, status, args.wait_timeout, out, err)


def _wait_ready(sup: Any, md: Any, status: Any, timeout: float, out: TextIO, err: TextIO) -> int:
    """Follow an agent's lifecycle events from ``status`` (an AgentStatus) until every replica
    runs (exit 0) or one has stopped for good (exit 1, with its reason and last stderr lines).
    Events go to stderr as they come; the agent's name goes to stdout once it runs. A wait
    that outlasts ``timeout`` exits 1 saying how many replicas run."""
    import grpc

    from ether.v1 import agent_io_pb2, supervisor_pb2

    name, wanted = status.info.name, status.info.replicas
    running = {p.replica for p in status.processes if p.state == agent_io_pb2.AGENT_STATE_RUNNING}
    if len(running) >= wanted:
        print(name, file=out)
        return EXIT_OK
    events = sup.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent=name, after_sequence=status.event_sequence),
        timeout=timeout,
        metadata=md,
    )
    try:
        for event in events:
            if event.replica >= wanted:
                continue  # a replica scaled away, stopping
            state = enum_name(agent_io_pb2.AgentState, event.state)
            who = name if event.replica < 0 else f"{name}[{event.replica}]"  # -1: the agent
            print(f"{who}: {state} {event.reason}".rstrip(), file=err)
            if state == "RUNNING":
                running.add(event.replica)
                if len(running) >= wanted:
                    print(name, file=out)
                    return EXIT_OK
                continue
            running.discard(event.replica)
            # STOPPED is the end of a replica scaled away whose index was taken again (its
            # successor starts next), unless the whole agent was stopped meanwhile.
            if state in SETTLED and (state != "STOPPED" or _all_stopped(sup, md, name)):
                for line in event.stderr_tail[-10:]:
                    print(f"  {line}", file=err)
                return EXIT_FAILED
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
            raise
        print(f"{name}: {len(running)} of {wanted} replicas running after {timeout:g}s", file=err)
    finally:
        events.cancel()
    return EXIT_FAILED


def _all_stopped(sup: Any, md: Any, name: str) -> bool:
    from ether.v1 import agent_io_pb2, supervisor_pb2

    listed = sup.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent=name), timeout=30, metadata=md
    )
    return all(p.state == agent_io_pb2.AGENT_STATE_STOPPED for p in listed.processes)


def _lifecycle(
    args: argparse.Namespace, _a: Any, sup: Any, md: Any, out: TextIO, err: TextIO
) -> int:
    from ether.v1 import agent_io_pb2, supervisor_pb2

    verb = args.agents_command
    if verb == "remove":
        sup.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=args.name), timeout=60, metadata=md)
        print(f"{args.name}: removed", file=out)
        return EXIT_OK
    calls = {
        "start": lambda: sup.StartAgent(
            supervisor_pb2.StartAgentRequest(name=args.name), timeout=60, metadata=md
        ),
        "stop": lambda: sup.StopAgent(
            supervisor_pb2.StopAgentRequest(name=args.name), timeout=120, metadata=md
        ),
        "restart": lambda: sup.RestartAgent(
            supervisor_pb2.RestartAgentRequest(name=args.name), timeout=120, metadata=md
        ),
        "scale": lambda: sup.ScaleAgent(
            supervisor_pb2.ScaleAgentRequest(name=args.name, replicas=args.replicas),
            timeout=120,
            metadata=md,
        ),
    }
    status = calls[verb]().agent
    if verb != "stop" and not args.no_wait:
        return _wait_ready(sup, md, status, args.wait_timeout, out, err)
    info = status.info
    state = enum_name(agent_io_pb2.AgentState, info.state)
    print(f"{info.name}: {state}, {info.ready_replicas}/{info.replicas} ready", file=out)
    return EXIT_OK


def _ps(args: argparse.Namespace, _a: Any, sup: Any, md: Any, out: TextIO, _e: Any) -> int:
    from ether.v1 import agent_io_pb2, supervisor_pb2

    request = supervisor_pb2.ListProcessesRequest(agent=args.name)
    found = every_page(sup.ListProcesses, request, "processes", md)
    if args.output == "json":
        print_json(found, out)
        return EXIT_OK
    now = time.time()
    rows = [
        [
            p.agent,
            str(p.replica),
            str(p.pid or "-"),
            enum_name(agent_io_pb2.AgentState, p.state),
            _uptime(now - p.started_at.ToNanoseconds() / 1e9) if p.pid else "-",
            str(p.restarts),
            str(p.in_flight),
            p.reason,
        ]
        for p in found
    ]
    header = ["AGENT", "REPLICA", "PID", "STATE", "UP", "RESTARTS", "IN FLIGHT", "REASON"]
    print_table(header, rows, out)
    return EXIT_OK


def _logs(args: argparse.Namespace, _a: Any, sup: Any, md: Any, out: TextIO, _e: Any) -> int:
    from ether.v1 import supervisor_pb2

    request = supervisor_pb2.StreamLogsRequest(
        agent=args.name, tail_lines=args.tail, follow=args.follow
    )
    for line in sup.StreamLogs(request, metadata=md):
        if args.output == "json":
            out.write(json.dumps(_log_fields(line), ensure_ascii=False) + "\n")
            out.flush()
            continue
        at = line.time.ToDatetime().strftime("%H:%M:%S.%f")[:-3]
        who = "" if line.replica < 0 else f"[{line.replica}] "  # -1: the agent (install)
        out.write(f"{at} {who}{line.source} {line.level} {line.message}\n")
        out.flush()
    return EXIT_OK


_COMMANDS = {
    "list": _list,
    "show": _show,
    "deploy": _deploy,
    "start": _lifecycle,
    "stop": _lifecycle,
    "restart": _lifecycle,
    "remove": _lifecycle,
    "scale": _lifecycle,
    "ps": _ps,
    "logs": _logs,
}


def _uptime(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _log_fields(line: Any) -> dict[str, Any]:
    """A LogLine as the proto3 JSON mapping, every field present."""
    from google.protobuf import json_format

    fields: dict[str, Any] = json_format.MessageToDict(
        line, always_print_fields_with_no_presence=True
    )
    return fields
