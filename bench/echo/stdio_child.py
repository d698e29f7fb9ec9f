"""The bare stdio baseline's child: NDJSON in, NDJSON out, answers correlated by id.

Reads ``{"id": N, "type": "task", "action": ..., "params": {...}}`` lines from stdin and writes
``{"id": N, "status": "ok", "result": <params>}`` lines to stdout, until stdin closes. Standard
library json, blocking I/O: the simplest long-running child there is.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    read = sys.stdin.buffer.readline
    out = sys.stdout.buffer
    while line := read():
        message = json.loads(line)
        out.write(
            json.dumps({"id": message["id"], "status": "ok", "result": message["params"]}).encode()
            + b"\n"
        )
        out.flush()


if __name__ == "__main__":
    main()
