"""``python -m ether_host.cli``: the ``ether`` command without its console script."""

import sys

from ether_host.cli import main

sys.exit(main())
