"""A server that never answers initialize: it reads its stdin and says so on stderr."""

import sys

print("silent server: reading requests, answering none", file=sys.stderr, flush=True)
for _line in sys.stdin:
    pass
