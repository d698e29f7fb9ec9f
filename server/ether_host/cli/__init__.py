"""The ``ether`` command: ``serve`` runs the host; every other command is a gRPC client of it,
one module per command group (``agents``, ``call``, ``term``, ``workflow``, ``chat``, ``mcp``,
``status``, ``top``)
over the helpers they share in ``client``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from ether_host.cli import agents, call, chat, mcp, serve, status, terminals, top, workflows
from ether_host.cli.client import EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error on one line and exits 2."""

    def error(self, message: str) -> NoReturn:
        options = ", ".join(
            sorted(o for a in self._actions for o in a.option_strings if o.startswith("--"))
        )
        hint = f" (allowed: {options})" if "unrecognized arguments" in message else ""
        self.exit(EXIT_USAGE, f"{self.prog}: {message}{hint}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ether", description="Ether, a gRPC polyglot agent host.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    serve.add_parser(commands)
    agents.add_parser(commands)
    call.add_parser(commands)
    chat.add_parser(commands)
    mcp.add_parser(commands)
    terminals.add_parser(commands)
    workflows.add_parser(commands)
    status.add_parser(commands)
    top.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ether`` console script."""
    args, unknown = _parser().parse_known_args(argv)
    if unknown:
        # Reported by the subcommand's parser, so the hint lists its flags (not just --help).
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    commands = {
        "serve": serve.run,
        "agents": agents.run,
        "call": call.run,
        "term": terminals.run,
        "chat": chat.run,
        "mcp": mcp.run,
        "workflow": workflows.run,
        "status": status.run,
        "top": top.run,
    }
    return commands[args.command](args)
