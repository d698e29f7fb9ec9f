"""The rights of the terminal operations, and the one check each operation makes.

A terminal is visible to its owner and to callers with the ``terminal.admin`` right; to anyone
else it does not exist (NOT_FOUND, so ids do not leak). Then each operation checks its own
right (``terminal.read``, ``terminal.write``, ...). An agent's terminals get every right but
admin (``AGENT_RIGHTS``): its own terminals only.
"""

from __future__ import annotations

from ether_host.auth import Identity
from ether_host.errors import PermissionDenied
from ether_host.reasons import Reason

ADMIN = "terminal.admin"
READ, WRITE, ATTACH, RESIZE, SIGNAL, CLOSE, CREATE = (
    "terminal.read",
    "terminal.write",
    "terminal.attach",
    "terminal.resize",
    "terminal.signal",
    "terminal.close",
    "terminal.create",
)
AGENT_RIGHTS = frozenset({READ, WRITE, ATTACH, RESIZE, SIGNAL, CLOSE, CREATE})


def sees(identity: Identity, owner: str) -> bool:
    """Whether ``identity`` sees the terminals of ``owner`` at all."""
    return owner == identity.name or identity.may(ADMIN)


def require(identity: Identity, right: str, what: str) -> None:
    """PERMISSION_DENIED (naming the right) unless ``identity`` holds ``right``."""
    if not identity.may(right):
        raise PermissionDenied(
            f"{identity.name} lacks the {right} right for {what}",
            reason=Reason.MISSING_RIGHT,
            metadata={"right": right},
        )
