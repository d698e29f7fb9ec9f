"""The processes the benchmark starts: baselines, the measuring client, and echo agents.

- ``client.py``: the measuring client, one measurement per process (the harness stays idle).
- ``grpc_server.py``: a bare grpc.aio server with a generic handler (unary and bidi echo of bytes).
- ``stdio_child.py``: a long-running Python child echoing NDJSON requests by id.
- ``mcp/server.py``: the official MCP SDK's low-level ``Server`` with one echo tool, over stdio.
- ``python/``, ``go/``, ``typescript/``: Ether echo agents (``echo-py``, ``echo-go``,
  ``echo-ts``), deployed into the host; ``python/`` also serves ``bench/workflows.py``.
"""
