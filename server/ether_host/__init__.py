"""Ether host: runs agents as supervised child processes and serves them over gRPC."""

__version__ = "0.1.0"
