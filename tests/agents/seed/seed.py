"""The seeds' minimal envelope: {"id","type":"task","payload"} -> {"id","status","result"|"error"}."""

import json
import sys

for line in sys.stdin:
    request = json.loads(line)
    payload = request.get("payload") or {}
    if payload.get("fail"):
        reply = {"id": request["id"], "status": "error", "error": "asked to fail"}
    else:
        reply = {
            "id": request["id"],
            "status": "ok",
            "result": {"upper": str(payload.get("text", "")).upper()},
        }
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
