"""Ether host: runs agents as supervised child processes and serves them over gRPC."""

import os

# Set before grpc loads (this package is imported before any module that imports grpc).
# grpcio builds with fork support on: a child forked by the host (uvloop forks to spawn
# agents and install tools) gets grpc's event_engine threads started again, and they
# sometimes crashed it with SIGSEGV before exec (dmesg: "event_engine ... segfault in
# cygrpc"; agents failing to start "killed by SIGSEGV", npm/tsc dying the same way).
# Nothing in the host uses grpc in a forked child.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

__version__ = "0.1.0"
