"""The ``ether`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

import anyio

from ether_host import cli_agents, cli_chat, cli_terminals, cli_workflow
from ether_host.auth import TokenFileError
from ether_host.config import LOG_FORMATS, LOG_LEVELS, ConfigError, load_config
from ether_host.logs import configure_logging, flush_logs
from ether_host.transport.listen import ListenError

EXIT_USAGE = 2


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
    serve = commands.add_parser("serve", help="run the host")
    serve.set_defaults(command_parser=serve)
    serve.add_argument("--config", help="TOML config file (also ETHER_CONFIG)")
    serve.add_argument("--listen", help="TCP HOST:PORT; '' disables TCP (default 127.0.0.1:50051)")
    serve.add_argument(
        "--unix-socket", dest="unix_socket", help="unix socket path; its directory is made 0700"
    )
    serve.add_argument(
        "--state-dir", dest="state_dir", help="where runs, audit and caches live (default .ether)"
    )
    serve.add_argument("--log-format", dest="log_format", help=f"one of {', '.join(LOG_FORMATS)}")
    serve.add_argument("--log-level", dest="log_level", help=f"one of {', '.join(LOG_LEVELS)}")
    serve.add_argument(
        "--auth-tokens-file", dest="auth_tokens_file", help="file of 'NAME TOKEN' lines"
    )
    serve.add_argument(
        "--shutdown-grace", dest="shutdown_grace", help="seconds to drain RPCs on stop"
    )
    serve.add_argument("--tls-cert", dest="tls_cert", help="serve TLS: certificate chain (PEM)")
    serve.add_argument("--tls-key", dest="tls_key", help="serve TLS: private key (PEM)")
    serve.add_argument(
        "--tls-client-ca",
        dest="tls_client_ca",
        help="require client certificates signed by this CA (PEM); the token file maps them",
    )
    serve.add_argument(
        "--tls-require-token",
        dest="tls_require_token",
        action="store_const",
        const=True,
        help="with --tls-client-ca: every call needs a token AND a certificate",
    )
    serve.add_argument(
        "--default-deadline",
        dest="default_deadline",
        help="seconds a call with one response and no deadline may run (default 3600; 0: none)",
    )
    serve.add_argument(
        "--agents-dir", dest="agents_dir", help="deploy every agent folder in this directory"
    )
    cli_agents.add_parsers(commands)
    cli_chat.add_parser(commands)
    cli_terminals.add_parser(commands)
    cli_workflow.add_parser(commands)
    return parser


def _serve(args: argparse.Namespace) -> int:
    from ether_host.main import run_host  # imported late: it loads grpc

    skip = ("command", "command_parser", "config")
    flags = {k: v for k, v in vars(args).items() if k not in skip}
    try:
        config = load_config(flags, config_file=args.config)
    except ConfigError as error:
        print(f"ether: {error}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(config.log_format, config.log_level)
    code = 0
    problem: Exception | None = None
    try:
        # grpc.aio runs on asyncio only; uvloop makes that loop ~15-30% cheaper per call.
        anyio.run(run_host, config, backend="asyncio", backend_options={"use_uvloop": True})
    except (ListenError, TokenFileError) as error:
        code, problem = 1, error
    except ConfigError as error:  # a feature table ([gateway], ...) checked when the host is built
        code, problem = EXIT_USAGE, error
    flush_logs()  # the log lines of the loop's last turn, before the message below
    if problem is not None:
        print(f"ether: {problem}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ether`` console script."""
    args, unknown = _parser().parse_known_args(argv)
    if unknown:
        # Reported by the subcommand's parser, so the hint lists its flags (not just --help).
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "serve":
        return _serve(args)
    if args.command in ("agents", "call"):
        return cli_agents.run(args)
    if args.command == "term":
        return cli_terminals.run(args)
    if args.command == "chat":
        return cli_chat.run(args)
    if args.command == "workflow":
        return cli_workflow.run(args)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
