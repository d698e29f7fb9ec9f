"""A server that dies before it answers anything, saying why on stderr."""

import sys

sys.exit("exits: cannot open my database")
