"""The batch floor's child: NDJSON in, NDJSON out, a whole read answered in one write.

Like ``stdio_child.py`` (stdlib json, answers correlated by id), but it reads what the pipe holds
(up to 1 MiB at once) and answers every complete line of it with one write, so a batch written in
one write by the parent comes back in about one: the least a child can do for a batch.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    rest = b""
    while chunk := os.read(stdin, 1 << 20):
        *lines, rest = (rest + chunk).split(b"\n")
        out = []
        for line in lines:
            message = json.loads(line)
            out.append(
                json.dumps({"id": message["id"], "status": "ok", "result": message["params"]})
            )
        if out:
            data = ("\n".join(out) + "\n").encode()
            while data:
                data = data[os.write(stdout, data) :]


if __name__ == "__main__":
    main()
