"""The deadlines of the tasks in flight, kept by one timer rather than one per task."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")

# Finished items are dropped from the heap lazily; past this many entries (or twice the live
# ones after the last sweep) the heap is swept, so it stays bounded when deadlines are long.
_SWEEP_AT_LEAST = 1024


class Deadlines(Generic[Item]):
    """Calls ``expire(item)`` once its deadline (``time.monotonic()``) has passed, unless
    ``live(item)`` says it has finished by then.

    A timer per task cost an echo task about a tenth of its CPU: a timer handle, an insert
    into the loop's timer heap and a cancel, though nearly every task ends long before its
    deadline. Here adding a task is a heap push; the one timer is moved only for an earlier
    deadline, and a finished task is forgotten when the timer next fires or the heap is swept.
    The heap refers to items weakly: a finished task is freed at once, not kept (with all it
    refers to) until then, which would fill the garbage collector's older generations.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        live: Callable[[Item], bool],
        expire: Callable[[Item], None],
    ) -> None:
        self._loop = loop
        self._live = live
        self._expire = expire
        self._heap: list[tuple[float, int, weakref.ref[Item]]] = []
        self._order = itertools.count()  # ties never compare items
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for = math.inf
        self._sweep_at = _SWEEP_AT_LEAST

    def __len__(self) -> int:
        """Entries held: the live items plus finished ones not dropped yet."""
        return len(self._heap)

    def add(self, deadline: float, item: Item) -> None:
        heapq.heappush(self._heap, (deadline, next(self._order), weakref.ref(item)))
        if len(self._heap) >= self._sweep_at:
            self._sweep()
        if deadline < self._armed_for:
            self._arm(deadline)

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = deadline
        left = max(0.0, deadline - time.monotonic())
        self._timer = self._loop.call_at(self._loop.time() + left, self._fire)

    def _fire(self) -> None:
        self._timer, self._armed_for = None, math.inf
        # The loop's timers have millisecond resolution and may fire a little early: a
        # deadline has passed only once time.monotonic() says so; the rest waits a new timer.
        now = time.monotonic()
        heap = self._heap
        while heap and (heap[0][0] <= now or not self._alive(heap[0][2])):
            _, _, ref = heapq.heappop(heap)
            item = ref()
            if item is not None and self._live(item):
                self._expire(item)
        if heap:
            self._arm(heap[0][0])

    def _sweep(self) -> None:
        self._heap = [entry for entry in self._heap if self._alive(entry[2])]
        heapq.heapify(self._heap)
        self._sweep_at = max(_SWEEP_AT_LEAST, 2 * len(self._heap))

    def _alive(self, ref: weakref.ref[Item]) -> bool:
        item = ref()
        return item is not None and self._live(item)
