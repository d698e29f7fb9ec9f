"""A plain callback module in the seeds' style: no SDK import.

Served with ``python -m ether_agent --path <this dir> --module plain --function run``: one
action, ``run``, that returns its payload unchanged.
"""

print("plain agent (python): loading")


def run(payload):
    return payload
