"""The host's own threads: the event loop keeps Linux's default CPU policy, its helpers do not
preempt it (see docs/agents.md, "Where a task's time goes")."""

from __future__ import annotations

import os
import time

from tests.support.host import HostProcess
from tests.support.procs import thread_policies


def test_the_hosts_helper_threads_run_batch_and_its_event_loop_does_not(
    host: HostProcess,
) -> None:
    """gRPC's event engine and timer threads and anyio's workers run under SCHED_BATCH, so waking
    one never preempts the event loop mid-turn; the event loop itself (the main thread, whose id
    is the host's pid) keeps SCHED_OTHER, so clients and agents never starve it."""
    pid = host.process.pid
    deadline = time.monotonic() + 10
    while True:
        policies = thread_policies(pid)
        helpers = {tid: policy for tid, policy in policies.items() if tid != pid}
        if set(helpers.values()) == {os.SCHED_BATCH} or time.monotonic() > deadline:
            break
    assert policies[pid] == os.SCHED_OTHER
    assert len(helpers) >= 3  # grpc's event engine threads at least
    assert set(helpers.values()) == {os.SCHED_BATCH}, helpers
