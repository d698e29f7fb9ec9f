"""A server that answers initialize with a protocol version no SDK speaks."""

import json
import sys

for line in sys.stdin:
    request = json.loads(line)
    if request.get("method") == "initialize":
        result = {
            "protocolVersion": "1999-01-01",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "old", "version": "0.1"},
        }
        print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}), flush=True)
