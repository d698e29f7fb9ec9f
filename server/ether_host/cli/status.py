"""``ether status``: the host in one look — its version and uptime (GetHostInfo), each agent's
state, replicas running of those asked for, tasks in flight and queued, and restarts
(ListAgents, ListProcesses), and the terminals and workflow runs open now. A table, or one JSON
object with ``-o json``. ``ether top`` (top.py) shows the same agents, refreshed.

Beside each agent: the tasks that ended since the host started and their p50/p99 durations,
read from the host's /metrics (task_metrics.py). One look has no interval, so no rate: tasks per
second are ``ether top``'s. Without metrics (no HTTP listener, metrics off, a refused token)
those columns are "-" (null in JSON) and one line says why.

Terminals and runs need rights of their own (terminal.read, workflow.read): a caller without
them still gets the rest, with those counts left out (null in JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from ether_host.cli.client import (
    EXIT_OK,
    Metadata,
    add_connection_arguments,
    add_output_argument,
    connect,
    enum_name,
    every_page,
    print_table,
    report_rpc_error,
)
from ether_host.cli.task_metrics import (
    MetricsUnavailable,
    TaskFigures,
    add_metrics_argument,
    format_seconds,
    scrape_host,
    since_start,
)


@dataclass(frozen=True)
class AgentRow:
    """One agent as ``status`` and ``top`` show it."""

    name: str
    state: str
    replicas: int  # asked for
    running: int  # replicas RUNNING now
    in_flight: int
    queued: int
    restarts: int  # of its replicas, since each replica's counters were last reset


def add_parser(commands: Any) -> None:
    """Register ``status`` on the ``ether`` command's subparsers."""
    text = "the host in one look: version, uptime, agents, terminals and runs"
    parser = commands.add_parser("status", help=text, description=text)
    parser.set_defaults(command_parser=parser)
    add_connection_arguments(parser)
    add_output_argument(parser)
    add_metrics_argument(parser)


def agent_rows(agents: Any, supervisor: Any, metadata: Metadata) -> list[AgentRow]:
    """Every agent with its load (ListAgents) and its replicas' states and restarts
    (ListProcesses), sorted by name."""
    from ether.v1 import agent_io_pb2, supervisor_pb2

    listed = every_page(agents.ListAgents, agent_io_pb2.ListAgentsRequest(), "agents", metadata)
    processes = every_page(
        supervisor.ListProcesses, supervisor_pb2.ListProcessesRequest(), "processes", metadata
    )
    running: dict[str, int] = {}
    restarts: dict[str, int] = {}
    for process in processes:
        if process.state == agent_io_pb2.AGENT_STATE_RUNNING:
            running[process.agent] = running.get(process.agent, 0) + 1
        restarts[process.agent] = restarts.get(process.agent, 0) + process.restarts
    return sorted(
        (
            AgentRow(
                name=a.name,
                state=enum_name(agent_io_pb2.AgentState, a.state),
                replicas=a.replicas,
                # An agent only other hosts of a cluster run has no process here: its hosts say.
                running=running.get(a.name, 0) if _here(a) else a.ready_replicas,
                in_flight=a.in_flight,
                queued=a.queued,
                restarts=restarts.get(a.name, 0),
            )
            for a in listed
        ),
        key=lambda row: row.name,
    )


def _here(agent: Any) -> bool:
    """The agent runs on the host asked (always, without a cluster)."""
    return not agent.hosts or any(h.local for h in agent.hosts)


def host_summary(supervisor: Any, metadata: Metadata) -> dict[str, Any]:
    """The host's version, start time and uptime in seconds; its cluster when in one."""
    from ether.v1 import supervisor_pb2

    host = supervisor.GetHostInfo(
        supervisor_pb2.GetHostInfoRequest(), timeout=30, metadata=metadata
    ).host
    started = host.started_at.ToNanoseconds() / 1e9
    summary: dict[str, Any] = {
        "version": host.version,
        "started_at": host.started_at.ToJsonString(),
        "uptime_seconds": round(max(0.0, time.time() - started), 3),
        "listeners": list(host.listeners),
    }
    if host.HasField("cluster"):
        cluster = host.cluster
        summary["cluster"] = {
            "host_name": cluster.host_name,
            "advertise": cluster.advertise,
            "redis": cluster.redis,
            "hosts": list(cluster.hosts),
            "degraded": cluster.degraded,
            "unreachable": list(cluster.unreachable),
        }
    return summary


def _count_if_allowed(method: Any, request: Any, field: str, metadata: Metadata) -> int | None:
    """How many items every page of a List call holds; None when the caller may not list
    them (PERMISSION_DENIED): a status for an agent operator needs no terminal right."""
    import grpc

    try:
        return len(every_page(method, request, field, metadata))
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.PERMISSION_DENIED:
            return None
        raise


def _other_counts(channel: Any, metadata: Metadata) -> dict[str, int | None]:
    from ether.v1 import terminal_pb2, terminal_pb2_grpc, workflow_pb2, workflow_pb2_grpc

    terminals = terminal_pb2_grpc.TerminalServiceStub(channel)
    workflows = workflow_pb2_grpc.WorkflowServiceStub(channel)
    return {
        "terminals_running": _count_if_allowed(
            terminals.ListTerminals,
            terminal_pb2.ListTerminalsRequest(state=terminal_pb2.TERMINAL_STATE_RUNNING),
            "terminals",
            metadata,
        ),
        "runs_active": _count_if_allowed(
            workflows.ListRuns,
            workflow_pb2.ListRunsRequest(
                states=[workflow_pb2.RUN_STATE_PENDING, workflow_pb2.RUN_STATE_RUNNING]
            ),
            "runs",
            metadata,
        ),
    }


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Entry point of ``ether status``."""
    import grpc  # imported late: `ether --help` should not load grpc

    from ether.v1 import agent_io_pb2_grpc, supervisor_pb2_grpc

    channel, metadata = connect(args)
    try:
        supervisor = supervisor_pb2_grpc.SupervisorServiceStub(channel)
        host = host_summary(supervisor, metadata)
        rows = agent_rows(agent_io_pb2_grpc.AgentIOServiceStub(channel), supervisor, metadata)
        counts = _other_counts(channel, metadata)
    except grpc.RpcError as error:
        return report_rpc_error(error, err, "ether status")
    finally:
        channel.close()
    figures, unavailable = _task_figures(args, host["listeners"])
    if args.output == "json":
        agents = [{**asdict(row), **_task_fields(figures, row.name)} for row in rows]
        summary = {
            "host": host,
            "agents": agents,
            **counts,
            "metrics_unavailable": unavailable,
        }
        out.write(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    out.write(f"host      ether {host['version']}, up {format_uptime(host['uptime_seconds'])}\n")
    if "cluster" in host:
        out.write(f"cluster   {cluster_line(host['cluster'])}\n")
    running = sum(1 for row in rows if row.running)
    out.write(f"agents    {len(rows)} deployed, {running} with a replica running\n")
    for key, label in (("terminals_running", "terminals"), ("runs_active", "runs")):
        shown = "(not allowed)" if counts[key] is None else str(counts[key])
        what = "running" if key == "terminals_running" else "pending or running"
        out.write(f"{label:<10}{shown} {what}\n")
    if rows:
        out.write("\n")
        print_table(
            [*AGENT_HEADER, "TASKS", "P50", "P99"],
            [[*agent_cells(row), *_task_cells(figures, row.name)] for row in rows],
            out,
        )
        if unavailable is None:
            out.write("TASKS: ended since the host started; P50, P99: their durations\n")
        else:
            out.write(f"TASKS, P50, P99: - ({unavailable})\n")
    return EXIT_OK


def _task_figures(
    args: argparse.Namespace, listeners: list[str]
) -> tuple[dict[str, TaskFigures] | None, str | None]:
    """Each agent's tasks since the host started, or None and why they cannot be had."""
    try:
        return since_start(scrape_host(args, listeners)), None
    except MetricsUnavailable as error:
        return None, str(error)


def _task_fields(figures: dict[str, TaskFigures] | None, name: str) -> dict[str, Any]:
    if figures is None:
        return {"tasks_ended": None, "p50_seconds": None, "p99_seconds": None}
    found = figures.get(name)
    if found is None:  # no task of it has ended on this host
        return {"tasks_ended": 0, "p50_seconds": None, "p99_seconds": None}
    return {"tasks_ended": int(found.ended), "p50_seconds": found.p50, "p99_seconds": found.p99}


def _task_cells(figures: dict[str, TaskFigures] | None, name: str) -> list[str]:
    fields = _task_fields(figures, name)
    ended = fields["tasks_ended"]
    return [
        "-" if ended is None else str(ended),
        format_seconds(fields["p50_seconds"]),
        format_seconds(fields["p99_seconds"]),
    ]


AGENT_HEADER = ["NAME", "STATE", "RUNNING", "IN FLIGHT", "QUEUED", "RESTARTS"]


def agent_cells(row: AgentRow) -> list[str]:
    return [
        row.name,
        row.state,
        f"{row.running}/{row.replicas}",
        str(row.in_flight),
        str(row.queued),
        str(row.restarts),
    ]


def cluster_line(cluster: dict[str, Any]) -> str:
    """``b of 3 hosts on redis://...``, or DEGRADED with the reason (docs/cluster.md)."""
    line = f"{cluster['host_name']} of {len(cluster['hosts'])} hosts on {cluster['redis']}"
    if cluster["degraded"]:
        return f"{line} -- DEGRADED, serving its own agents only: {cluster['degraded']}"
    if cluster.get("unreachable"):
        return f"{line} -- UNREACHABLE: {'; '.join(cluster['unreachable'])}"
    return line


def format_uptime(seconds: float) -> str:
    """3d4h, 2h05m, 4m12s, 9s: the two largest units."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
