"""The AutoGen peer of bench/peers.py: the processes run from a throwaway venv
(``.ether/bench-peers/autogen-venv``, from ``requirements.txt``), never the project's.

- ``echo.py host``: ``GrpcWorkerAgentRuntimeHost``, the service that routes messages;
- ``echo.py worker``: a ``GrpcWorkerAgentRuntime`` with one echo agent;
- ``echo.py caller '<spec>'``: a ``GrpcWorkerAgentRuntime`` that sends the benchmark's ~1 KB
  params with ``send_message`` and awaits each reply, one measurement per process, printed as one
  JSON line like ``bench/echo/client.py``.
"""
