"""A Python SDK agent that starts `sleep` processes every way one can detach from it."""

from __future__ import annotations

import os
import subprocess
from typing import Any

from ether_agent import Agent

agent = Agent("detacher", version="1.0.0", description="Detaches sleeps for the leak tests.")

# `sleep <seconds>` per form: the test knows each process by its unique duration.
FORMS = {
    "setsid": "setsid sleep {} &",
    "nohup": "nohup sleep {} >/dev/null 2>&1 &",
    "setsid_fork": "setsid --fork sleep {}",
    "subshell": "(sleep {} &)",
    "own_group": "set -m; sleep {} &",
}


@agent.action(description="Start one sleep per form (and a double-forked daemon); return.")
def detach(base: int) -> dict[str, Any]:
    durations = {form: base + index for index, form in enumerate(FORMS)}
    script = "\n".join(FORMS[form].format(seconds) for form, seconds in durations.items())
    subprocess.run(
        ["sh", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    durations["daemon"] = base + len(FORMS)
    _daemon(durations["daemon"])
    return {"durations": durations}


def _daemon(seconds: int) -> None:
    """The classic double fork: the daemon's parent exits, so it has none of ours."""
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execvp("sleep", ["sleep", str(seconds)])
        os._exit(0)
    os.waitpid(first, 0)
