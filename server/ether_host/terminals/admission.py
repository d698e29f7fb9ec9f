"""What a new terminal must pass before it starts: the host's and its owner's terminal limits,
and the sandbox it gets (which directories it sees, where it starts).

An agent's terminals get their agent's sandbox (main wires ``TerminalManager.sandbox_for`` to
terminals/hostcalls.py); a client's get the ``[terminals]`` table's (``client_sandbox``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import anyio

from ether_host import containment
from ether_host.errors import FieldViolation, InvalidArgument, QuotaViolation, ResourceExhausted
from ether_host.reasons import Reason
from ether_host.sandbox import Grant, SandboxPolicy, SandboxSettings, runtimes
from ether_host.terminals.settings import TerminalSettings


def check_limits(settings: TerminalSettings, owners: Iterable[str], owner: str) -> None:
    """Refuse a new terminal of ``owner`` past the host's limit or the owner's (``owners``:
    the owner of every terminal open now), RESOURCE_EXHAUSTED naming the setting."""
    owned = list(owners)
    total = len(owned)
    if total >= settings.max_terminals:
        raise ResourceExhausted(
            f"the host runs {total} terminals, its limit (terminals.max_terminals); close one first",
            reason=Reason.TERMINAL_LIMIT,
            metadata={"limit": str(settings.max_terminals), "setting": "terminals.max_terminals"},
            quota_violations=[
                QuotaViolation("host", f"at most {settings.max_terminals} terminals")
            ],
        )
    mine = sum(1 for other in owned if other == owner)
    if mine >= settings.max_terminals_per_owner:
        raise ResourceExhausted(
            f"{owner} owns {mine} terminals, the limit per owner (terminals.max_terminals_per_owner); "
            f"close one first",
            reason=Reason.TERMINAL_OWNER_LIMIT,
            metadata={
                "limit": str(settings.max_terminals_per_owner),
                "setting": "terminals.max_terminals_per_owner",
            },
            quota_violations=[
                QuotaViolation(
                    f"owner:{owner}",
                    f"at most {settings.max_terminals_per_owner} terminals per owner",
                )
            ],
        )


def client_sandbox(settings: TerminalSettings) -> tuple[Grant, SandboxSettings] | None:
    """What a client's terminal may see: the ``[terminals]`` table's paths, or no sandbox."""
    if not settings.sandbox:
        return None
    grant = Grant("none", settings.sandbox_read_only, settings.sandbox_read_write)
    return grant, SandboxSettings()


async def sandbox_policy(
    found: tuple[Grant, SandboxSettings],
    state_dir: Path,
    terminal_id: str,
    asked_cwd: str,
    cwd: str,
) -> tuple[SandboxPolicy, str | None]:
    """The sandbox of a new terminal given what its owner may see (``found``), with a scratch
    directory of its own where it starts unless the caller named a directory it can see;
    and that scratch directory when it goes at close (all but ``keep_scratch`` ones: a
    terminal id is never reused)."""
    grant, settings = found
    if asked_cwd:  # checked first: a refused terminal leaves no scratch directory behind
        visible = (*grant.read_only, *grant.read_write, *containment.SYSTEM_READ_ONLY)
        if not any(cwd == top or cwd.startswith(top.rstrip("/") + "/") for top in visible):
            raise InvalidArgument(
                f"cwd {cwd!r} is not visible in the terminal's sandbox (its scratch "
                "directory, the system directories and the paths the host config gives it)",
                reason=Reason.INVALID_CWD,
                violations=[FieldViolation("cwd", "a directory the sandbox shows")],
            )
    scratch = str(
        await anyio.to_thread.run_sync(settings.scratch, state_dir, "terminals", terminal_id)
    )
    policy = SandboxPolicy(
        scratch=scratch,
        cwd=cwd if asked_cwd else scratch,
        read_only=(*runtimes(), *grant.read_only),
        read_write=grant.read_write,
        network=grant.network,
    )
    return policy, None if settings.keep_scratch else scratch
