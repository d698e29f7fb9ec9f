"""``ether serve``: run the host in this process (the one command that is not a gRPC client)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ether_host.config import LOG_FORMATS, LOG_LEVELS, ConfigError, load_config

EXIT_USAGE = 2


def add_parser(commands: Any) -> None:
    """Register ``serve`` and its flags (each one a setting of the config file) on the ``ether``
    command's subparsers."""
    serve = commands.add_parser("serve", help="run the host")
    serve.set_defaults(command_parser=serve)
    serve.add_argument("--config", help="TOML config file (also ETHER_CONFIG)")
    serve.add_argument("--listen", help="TCP HOST:PORT; '' disables TCP (default 127.0.0.1:50051)")
    serve.add_argument(
        "--http-listen",
        dest="http_listen",
        help="HTTP HOST:PORT for /healthz and /mcp; '' or unset: no HTTP listener",
    )
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


def run(args: argparse.Namespace) -> int:
    """Entry point of ``ether serve``: 0 after a clean stop, 1 when the host cannot listen,
    read its token file or join its cluster, 2 for a bad setting."""
    import anyio

    # Imported late: they load grpc, which `ether --help` and the client commands' parser need not.
    from ether_host.auth import TokenFileError
    from ether_host.cluster import ClusterError
    from ether_host.logs import configure_logging, flush_logs
    from ether_host.main import run_host
    from ether_host.transport.listen import ListenError

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
    except (ListenError, TokenFileError, ClusterError) as error:
        code, problem = 1, error
    except ConfigError as error:  # a feature table ([gateway], ...) checked when the host is built
        code, problem = EXIT_USAGE, error
    flush_logs()  # the log lines of the loop's last turn, before the message below
    if problem is not None:
        print(f"ether: {problem}", file=sys.stderr)
    return code
