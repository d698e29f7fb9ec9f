"""A Python SDK agent that writes a file in its scratch folder past the file size limit
(RLIMIT_FSIZE): once as Python runs it (SIGXFSZ ignored, so the write fails with EFBIG), once
with SIGXFSZ back to its default action (the kernel then ends the process)."""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path
from typing import Any

from ether_agent import Agent

agent = Agent("scribe", version="1.0.0", description="Writes past its file size limit.")

CHUNK = 64 * 1024


def _fill(name: str, size: int) -> dict[str, Any]:
    """Write ``size`` bytes to ``name`` in the scratch folder, 64 KiB at a time; how many were
    written and the errno name of the write that failed ("" when none did)."""
    path = Path(os.environ["ETHER_SCRATCH"]) / name
    written, error = 0, ""
    with path.open("wb", buffering=0) as handle:
        try:
            while written < size:
                written += handle.write(b"x" * min(CHUNK, size - written))
        except OSError as failure:
            error = errno.errorcode.get(failure.errno or 0, str(failure))
    return {"written": written, "error": error, "on_disk": path.stat().st_size}


@agent.action(description="Write size bytes to a scratch file; what was written, the error.")
def fill(name: str, size: int) -> dict[str, Any]:
    return _fill(name, size)


@agent.action(description="As fill, with SIGXFSZ at its default action (it ends the process).")
async def fill_unguarded(name: str, size: int) -> dict[str, Any]:
    # async: the SDK runs it on the main thread, the only one that may set a signal's action
    # (a plain function runs in a worker thread).
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    return _fill(name, size)
