"""``ether top``: the agents, refreshed from the host every ``--interval`` seconds on a live
rich view — state, replicas running of those asked for, tasks in flight and queued, restarts
(and how many since the view opened). ``--once`` (or ``--iterations N``) prints plain tables
instead, for scripts and for a terminal that is not one.

Tasks per second and latency percentiles are not shown: the host does not count finished tasks
or time them anywhere a client can read today (ListAgents and ListProcesses give the load now,
WatchEvents only state changes); they come with the host's metrics (README, "Watching the host").
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from ether_host.cli.client import (
    EXIT_OK,
    Metadata,
    add_connection_arguments,
    connect,
    print_table,
    report_rpc_error,
)
from ether_host.cli.status import (
    AGENT_HEADER,
    AgentRow,
    agent_cells,
    agent_rows,
    format_uptime,
    host_summary,
)


def add_parser(commands: Any) -> None:
    """Register ``top`` on the ``ether`` command's subparsers."""
    text = "a live view of the agents: state, replicas, load and restarts"
    parser = commands.add_parser("top", help=text, description=text)
    parser.set_defaults(command_parser=parser)
    add_connection_arguments(parser)
    parser.add_argument(
        "--interval", type=float, default=2.0, help="seconds between refreshes (default 2)"
    )
    parser.add_argument(
        "--iterations", type=int, default=0, help="refresh this many times, then exit (0: until ^C)"
    )
    parser.add_argument(
        "--once", action="store_true", help="print the agents once as a plain table and exit"
    )


class _Sampler:
    """One look at the host per call, with the restarts seen at the first look kept, so the
    view can say which agents restarted while it was open."""

    def __init__(self, channel: Any, metadata: Metadata) -> None:
        from ether.v1 import agent_io_pb2_grpc, supervisor_pb2_grpc

        self._agents = agent_io_pb2_grpc.AgentIOServiceStub(channel)
        self._supervisor = supervisor_pb2_grpc.SupervisorServiceStub(channel)
        self._metadata = metadata
        self._first_restarts: dict[str, int] = {}

    def sample(self) -> tuple[dict[str, Any], list[AgentRow], dict[str, int]]:
        host = host_summary(self._supervisor, self._metadata)
        rows = agent_rows(self._agents, self._supervisor, self._metadata)
        for row in rows:
            self._first_restarts.setdefault(row.name, row.restarts)
        since = {row.name: max(0, row.restarts - self._first_restarts[row.name]) for row in rows}
        return host, rows, since


def _title(host: dict[str, Any], rows: list[AgentRow]) -> str:
    running = sum(1 for row in rows if row.running)
    return (
        f"ether {host['version']} up {format_uptime(host['uptime_seconds'])} - "
        f"{len(rows)} agents, {running} running, "
        f"{sum(r.in_flight for r in rows)} tasks in flight, {sum(r.queued for r in rows)} queued"
    )


def _view(host: dict[str, Any], rows: list[AgentRow], since: dict[str, int]) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=_title(host, rows), title_justify="left", expand=False)
    for column in [*AGENT_HEADER, "NEW RESTARTS"]:
        table.add_column(column, justify="left" if column in ("NAME", "STATE") else "right")
    for row in rows:
        style = {"RUNNING": "green", "FATAL": "bold red", "BACKOFF": "yellow"}.get(row.state, "")
        cells = [Text(cell) for cell in agent_cells(row)]  # Text: a name is never markup
        cells[1].stylize(style)
        fresh = since.get(row.name, 0)
        cells.append(Text(str(fresh), style="bold yellow" if fresh else ""))
        table.add_row(*cells)
    table.caption = "tasks/s and p50/p99 latencies: not exposed by the host yet"
    return table


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Entry point of ``ether top``."""
    import grpc  # imported late: `ether --help` should not load grpc

    iterations = 1 if args.once else max(0, args.iterations)
    interval = max(0.1, args.interval)
    channel, metadata = connect(args)
    sampler = _Sampler(channel, metadata)
    try:
        if args.once or args.iterations or not out.isatty():
            return _print_frames(sampler, iterations, interval, out)
        return _live(sampler, interval)
    except grpc.RpcError as error:
        return report_rpc_error(error, err, "ether top")
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        channel.close()


def _print_frames(sampler: _Sampler, iterations: int, interval: float, out: TextIO) -> int:
    """Plain tables, one per refresh, a blank line between them."""
    done = 0
    while True:
        host, rows, since = sampler.sample()
        if done:
            out.write("\n")
        out.write(_title(host, rows) + "\n")
        print_table(
            [*AGENT_HEADER, "NEW RESTARTS"],
            [[*agent_cells(row), str(since.get(row.name, 0))] for row in rows],
            out,
        )
        out.flush()
        done += 1
        if iterations and done >= iterations:
            return EXIT_OK
        time.sleep(interval)


def _live(sampler: _Sampler, interval: float) -> int:
    """The rich view, redrawn in place until ^C."""
    from rich.live import Live

    with Live(_view(*sampler.sample()), auto_refresh=False, screen=False) as live:
        while True:
            time.sleep(interval)
            live.update(_view(*sampler.sample()), refresh=True)
