"""Tasks across hosts over Redis Streams (docs/cluster.md, "Tasks across hosts").

A task for an agent this host does not run goes to the agent's stream ``ether:tasks:<agent>``;
the hosts that run the agent read it as one consumer group (``ether``), so each task goes to
one of them, which runs it through its own dispatcher (deadline, budget and queueing as for a
local call) and answers on the caller's stream ``ether:replies:<host>``, after the task's
events (started, progress, log) when the caller follows them (ExecuteStream). A cancel (the caller
went away, or its deadline passed) is published on ``ether:cancels``; the host running the task
cancels it. The dispatcher comes here only for an agent its own host does not run. What goes
on the streams (their names, the JSON of a task, a result and an error) is task_wire.py's.

Each task sent is recorded in Redis until its answer (ledger.py): the task id is its
idempotency key across the cluster, and the one answer goes to every caller waiting. A host
that dies holding tasks leaves them pending in the consumer group; a live host that runs the
agent claims them once they are idle for ``claim_idle`` and their host has left the directory
(claims.py), while a live host keeps the entries it runs fresh (docs/cluster.md, "When a host
dies"). A host with tasks queued for an agent leaves its stream to a host with a free slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import orjson
import structlog

from ether_host.agents import Dispatcher, TaskEvent, TaskInput, TaskResult
from ether_host.cluster.claims import Claimed, Claims, consumer_name, host_of
from ether_host.cluster.direct import DirectConnection
from ether_host.cluster.ledger import (
    RECORD_MARGIN,
    RECORD_WITHOUT_DEADLINE,
    TaskLedger,
    digest,
)
from ether_host.cluster.task_wire import (
    error_from,
    error_json,
    replies_stream,
    result_from,
    result_json,
    streams,
    task_from,
    task_json,
    tasks_stream,
    text,
)
from ether_host.errors import (
    DeadlineExceeded,
    EtherError,
    InvalidArgument,
    NotFound,
    Unavailable,
)
from ether_host.logs import log_later
from ether_host.reasons import Reason
from ether_host.supervisor import Supervisor

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = structlog.get_logger("ether.cluster")

GROUP = "ether"
CANCELS = "ether:cancels"
BLOCK_MS = 1000  # a blocking read returns at least this often, to see new agents and the stop
TRIM_EVERY = 1.0  # seconds between trims of this host's reply stream to what it has not read
STREAM_LENGTH = 100_000  # tasks an agent's stream holds at most (entries are deleted once run)
LEFT_LOG_EVERY = 10.0  # seconds: "cluster leaves tasks to other hosts" once per busy spell


class RemoteTasks:
    """Both sides of the tasks between hosts, for one host: the caller's (``execute``) and the
    runner's (``serve``: the consumer of the streams of this host's agents, and the claimer of
    what dead hosts left on them)."""

    def __init__(
        self,
        host_name: str,
        supervisor: Supervisor,
        dispatcher: Dispatcher,
        redis: Redis,
        errors: tuple[type[BaseException], ...],
        stopping: Callable[[], bool],
        *,
        instance: str,
        claim_idle: float,
        free_elsewhere: Callable[[str], bool] = lambda agent: False,
    ) -> None:
        self._host = host_name
        self._consumer = consumer_name(host_name, instance)  # a restarted host is a new one
        self._supervisor = supervisor
        self._dispatcher = dispatcher
        self._redis = redis  # its own client: blocking reads hold a connection each
        # The two blocking reads, each on a connection of its own (direct.py: a read through
        # the client costs ~15 µs more CPU, and they run about once per two tasks).
        self._reply_reader = DirectConnection(redis)
        self._task_reader = DirectConnection(redis)
        self._errors = errors
        self._stopping = stopping
        self._claim_idle = claim_idle
        self._free_elsewhere = free_elsewhere
        self._left_at: dict[str, float] = {}  # when each agent's tasks were last left to others
        self._ledger = TaskLedger(redis, GROUP, STREAM_LENGTH)
        self._claims = Claims(redis, GROUP, self._consumer, claim_idle)
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._sinks: dict[str, Callable[[TaskEvent], None]] = {}  # callers following events
        self._groups: set[str] = set()  # agents' streams whose consumer group exists
        self._running: set[str] = set()  # task ids this host runs for others
        # The entries this host runs, by stream: entry id -> task id (kept fresh, not claimed).
        self._held: dict[str, dict[str, str]] = {}

    async def close(self) -> None:
        await self._reply_reader.close()
        await self._task_reader.close()
        await self._redis.aclose()

    async def send_batches(self) -> None:
        """The ledger's calls made while others are on their way go out in batches while this
        runs (the cluster's task group)."""
        await self._ledger.send_batches()

    # --- the caller's side ---------------------------------------------------------------------

    async def execute(
        self, task: TaskInput, on_event: Callable[[TaskEvent], None] | None = None
    ) -> TaskResult:
        """Run ``task`` on a host that runs its agent; its result, or its EtherError. Its
        events, when ``on_event`` is given, come before the answer on the same stream, so they
        reach ``on_event`` in the order the agent sent them, all before the result.

        A task id the cluster knows (queued or running, sent by any host) with the same agent,
        action and params is the same task: this call waits for its one answer (without its
        events) and never cancels it. With other params it is refused, naming the id."""
        task.task_id = task.task_id or f"r-{uuid.uuid4().hex}"
        if task.task_id in self._waiting:
            raise InvalidArgument(
                f"task_id {task.task_id!r} is already running; use another id",
                reason=Reason.DUPLICATE_TASK_ID,
            )
        deadline = task.deadline
        if task.budget.max_time is not None:
            deadline = min(deadline or math.inf, time.monotonic() + task.budget.max_time)
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[task.task_id] = reply
        if on_event is not None:
            self._sinks[task.task_id] = on_event
        joined = False
        try:
            outcome = await self._submit(task, deadline, on_event is not None)
            if outcome == "other":
                raise InvalidArgument(
                    f"task_id {task.task_id!r} is taken by another task in the cluster (another "
                    "agent, action or params), queued or running now; use another id",
                    reason=Reason.DUPLICATE_TASK_ID,
                    resource=("task", task.task_id),
                )
            joined = outcome == "same"
            if joined:
                log.info("cluster task joined", task_id=task.task_id, agent=task.agent)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            with anyio.move_on_after(math.inf if left is None else left) as waited:
                answer = await reply
            if waited.cancelled_caught:
                if not joined:
                    await self._cancel(task.task_id, "its deadline passed on the calling host")
                raise DeadlineExceeded(
                    f"task {task.task_id} on agent {task.agent} (on another host) did not finish "
                    "before its deadline",
                    reason=Reason.TASK_DEADLINE_EXCEEDED,
                    resource=("task", task.task_id),
                )
        except asyncio.CancelledError:
            if not joined:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    await self._cancel(task.task_id, "the caller cancelled it")
            raise
        finally:
            self._waiting.pop(task.task_id, None)
            self._sinks.pop(task.task_id, None)
        if "error" in answer:
            raise error_from(answer["error"])
        return result_from(answer["result"])

    async def _submit(self, task: TaskInput, deadline: float | None, events: bool) -> str:
        """Put the task on its agent's stream, recorded under its id, or join the task the id
        already names: 'new', 'same' or 'other' (ledger.py)."""
        ttl = RECORD_WITHOUT_DEADLINE
        if deadline is not None:
            ttl = max(0.0, deadline - time.monotonic()) + RECORD_MARGIN
        try:
            await self._ensure_group(task.agent)
            return await self._ledger.submit(
                task.task_id,
                tasks_stream(task.agent),
                task_digest=digest(task.agent, task.action, task.params),
                reply_to=replies_stream(self._host),
                ttl=ttl,
                task_json=task_json(task, replies_stream(self._host), events),
                stream_length=STREAM_LENGTH,
            )
        except self._errors as error:
            raise Unavailable(
                f"agent {task.agent} runs on other hosts only, and Redis, which carries tasks "
                f"to them, is out of reach: {error}; the task was not sent",
                reason=Reason.CLUSTER_UNAVAILABLE,
                retry_after=1.0,
            ) from None

    async def _cancel(self, task_id: str, reason: str) -> None:
        try:
            await self._redis.publish(CANCELS, orjson.dumps({"task_id": task_id, "reason": reason}))
        except self._errors as error:
            log.warning("cluster: could not send a cancel", task_id=task_id, error=str(error))

    async def read_replies(self) -> None:
        """Hand every reply on this host's stream to the call waiting for it."""
        stream = replies_stream(self._host)
        # Read from the stream's end as first seen: not an earlier namesake's replies.
        last: str | bytes = ""
        trimmed_at = 0.0
        while not self._stopping():
            try:
                if not last:
                    newest: Any = await self._redis.xrevrange(stream, count=1)
                    last = newest[0][0] if newest else "0-0"
                elif time.monotonic() - trimmed_at > TRIM_EVERY:
                    # What was read is done with; once a second, not after every read (a
                    # command per read at 64 tasks in flight).
                    await self._redis.xtrim(stream, minid=last)
                    trimmed_at = time.monotonic()
                found = await self._reply_reader.command(
                    "XREAD", "COUNT", 256, "BLOCK", BLOCK_MS, "STREAMS", stream, last
                )
            except self._errors:
                await anyio.sleep(BLOCK_MS / 1000)  # Redis away: the heartbeat says degraded
                continue
            for _, entries in streams(found):
                for entry_id, fields in entries:
                    last = entry_id
                    if b"event" in fields:
                        self._event(orjson.loads(fields[b"event"]))
                        continue
                    answer = orjson.loads(fields[b"answer"])
                    waiting = self._waiting.get(answer.get("task_id", ""))
                    if waiting is not None and not waiting.done():
                        waiting.set_result(answer)
            if found:
                # The callers just answered go first; the next read (a command to pack and
                # write) after them, off their path (bench/cluster.py's remote p50).
                await asyncio.sleep(0)

    def _event(self, value: dict[str, Any]) -> None:
        sink = self._sinks.get(str(value.get("task_id", "")))
        if sink is None:
            return  # its caller has gone
        try:
            sink(TaskEvent(str(value["kind"]), value["payload"], float(value["time"])))
        except Exception as error:  # a full or closed sink: that caller's loss, not the reader's
            log.warning("cluster: a task event was not delivered", error=str(error))

    # --- the runner's side ---------------------------------------------------------------------

    async def _ensure_group(self, agent: str) -> None:
        if agent in self._groups:
            return
        try:
            # From the stream's start, not its end: a task a caller added before the group was
            # made (the first host of an agent, or a Redis restarted empty under a caller that
            # still knew the group) is read too. Entries are deleted once answered, and one whose
            # record is gone is dropped at its start (ledger.py), so none runs twice.
            await self._redis.xgroup_create(tasks_stream(agent), GROUP, id="0", mkstream=True)
        except self._errors as error:
            if "BUSYGROUP" not in str(error):
                raise
        self._groups.add(agent)

    async def serve(self) -> None:
        """Take tasks from the streams of this host's agents until the host stops, and claim
        the ones dead hosts left on them."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._follow_cancels)
            tg.start_soon(self._claim_and_keep, tg)
            read: list[str] = []
            while not self._stopping():
                agents = sorted(self._supervisor.agents)
                if agents != read:  # from the next read on, these agents' tasks come here
                    log.info("cluster takes tasks", host=self._host, agents=agents)
                    read = agents
                readable = [a for a in agents if not self._leave_to_others(a)]
                if not readable:
                    # A queue here drains within a few tasks' time: look again soon.
                    await anyio.sleep(BLOCK_MS / 1000 / (10 if agents else 1))
                    continue
                try:
                    for agent in readable:
                        await self._ensure_group(agent)
                    found = await self._task_reader.command(
                        "XREADGROUP", "GROUP", GROUP, self._consumer, "COUNT", 64,
                        "BLOCK", BLOCK_MS, "STREAMS",
                        *[tasks_stream(a) for a in readable], *[">"] * len(readable),
                    )  # fmt: skip
                except self._errors:
                    self._groups.clear()  # a restarted Redis has none of them
                    await anyio.sleep(BLOCK_MS / 1000)
                    continue
                for stream, entries in streams(found):
                    held = self._held.setdefault(text(stream), {})
                    for entry_id, fields in entries:
                        # This host's from now on: no claim round takes it up meanwhile.
                        held[text(entry_id)] = ""
                        tg.start_soon(self._run, text(stream), text(entry_id), fields)
                if found:
                    await asyncio.sleep(0)  # the tasks just read reach their agents first
            tg.cancel_scope.cancel()

    def _leave_to_others(self, name: str) -> bool:
        """Least loaded first, where it can be decided: while tasks for ``name`` wait for a
        slot here and another host had one free at its last heartbeat, this host reads none of
        the agent's stream, and a host with a free slot takes them. Otherwise whichever host
        reads first takes the task."""
        agent = self._supervisor.agents.get(name)
        if agent is None or agent.queued == 0 or not self._free_elsewhere(name):
            return False
        now = time.monotonic()
        if now - self._left_at.get(name, -math.inf) > LEFT_LOG_EVERY:
            log.info("cluster leaves tasks to other hosts", agent=name, queued=agent.queued)
        self._left_at[name] = now
        return True

    async def _run(self, stream: str, entry: str, fields: dict[bytes, bytes]) -> None:
        """Run a task read from its stream. Read is taken: no round trip to Redis marks it
        (ledger.py); a task whose caller no longer waits runs to no one, and its entry is
        dropped with its answer."""
        message = orjson.loads(fields[b"task"])
        task = task_from(message["task"])
        # Every task logs these two lines: rendered in a batch, off its path (logs.py).
        log_later(log.info, "cluster task taken", {"task_id": task.task_id, "agent": task.agent})
        await self._serve_task(stream, entry, task, message)

    async def _serve_task(
        self, stream: str, entry: str, task: TaskInput, message: dict[str, Any]
    ) -> None:
        """Run ``task`` (its entry held by this host meanwhile) and send its one answer."""
        reply_to = message["reply_to"]
        # The caller follows the task's events (ExecuteStream): they go to its stream in order,
        # one at a time, all before the answer.
        events: asyncio.Queue[TaskEvent | None] | None = (
            asyncio.Queue() if message.get("events") else None
        )
        held = self._held.setdefault(stream, {})
        held[entry] = task.task_id
        self._running.add(task.task_id)
        try:
            if events is None:
                answer, code = await self._answer(task, None)
            else:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._send_events, reply_to, task.task_id, events)
                    answer, code = await self._answer(task, events)
                    events.put_nowait(None)  # the sender ends once every event is sent
            await self._finish(stream, entry, task.task_id, answer)
            done = {"task_id": task.task_id, "agent": task.agent, "code": code}
            log_later(log.info, "cluster task done", done)
        finally:
            # Only now: while the answer is being sent, the entry is still this host's.
            self._running.discard(task.task_id)
            held.pop(entry, None)

    async def _finish(self, stream: str, entry: str, task_id: str, answer: dict[str, Any]) -> None:
        try:
            sent = await self._ledger.finish(
                task_id, stream, entry, self._consumer, orjson.dumps(answer)
            )
        except self._errors as error:  # left pending here: the claim round takes it up again
            log.warning("cluster: could not answer a task", task_id=task_id, error=str(error))
            return
        if not sent:
            log.warning(
                "cluster task answer dropped: another host took the task over, or its caller "
                "gave up long ago",
                task_id=task_id,
            )

    async def _claim_and_keep(self, tg: anyio.abc.TaskGroup) -> None:
        """Every third of ``claim_idle``: keep this host's entries fresh, and claim what dead
        hosts left on the streams of this host's agents."""
        while not self._stopping():
            await anyio.sleep(self._claim_idle / 3)
            for agent in sorted(self._groups & set(self._supervisor.agents)):
                stream = tasks_stream(agent)
                held = dict(self._held.get(stream, {}))
                try:
                    await self._ledger.keep(stream, self._consumer, held)
                    claimed = await self._claims.stuck(stream, set(held))
                except self._errors as error:
                    log.debug("cluster: no claim round", stream=stream, error=str(error))
                    continue
                for entry in claimed:
                    tg.start_soon(self._take_over, entry)

    async def _take_over(self, claimed: Claimed) -> None:
        """A task a dead host held (or this host lost track of): run it here when it never
        started or its action is idempotent; else answer that its host died."""
        message = orjson.loads(claimed.fields[b"task"])
        task = task_from(message["task"])
        agent = self._supervisor.agents.get(task.agent)
        idempotent = task.idempotent
        if idempotent is None:
            actions = agent.actions if agent is not None else ()
            idempotent = any(a.name == task.action and a.idempotent for a in actions)
        try:
            verdict = await self._ledger.take_over(
                task.task_id, claimed.stream, claimed.entry, self._consumer, idempotent
            )
            # Its deadline travelled as seconds left when it was sent: less the entry's age.
            seconds, micros = await self._redis.time()
            age = seconds + micros / 1e6 - int(claimed.entry.partition("-")[0]) / 1000
        except self._errors as error:
            log.warning("cluster: could not claim a task", task_id=task.task_id, error=str(error))
            return
        died = host_of(verdict.previous or claimed.consumer)
        log.info(
            "cluster task claimed",
            task_id=task.task_id,
            agent=task.agent,
            host=died,
            verdict=verdict.verdict,
        )
        if verdict.verdict == "gone":
            return
        if verdict.verdict == "died":
            lost = Unavailable(
                f"host {died} died or stopped while running task {task.task_id}; the action "
                f"{task.action!r} of agent {task.agent} is not idempotent, so it was not run "
                "again (it may have run in part there)",
                reason=Reason.AGENT_DIED,
                resource=("task", task.task_id),
                retry_after=1.0,
            )
            answer = {"task_id": task.task_id, "error": error_json(lost)}
            await self._finish(claimed.stream, claimed.entry, task.task_id, answer)
            return
        if task.deadline is not None:
            task.deadline -= max(0.0, age)
        await self._serve_task(claimed.stream, claimed.entry, task, message)

    async def _answer(
        self, task: TaskInput, events: asyncio.Queue[TaskEvent | None] | None
    ) -> tuple[dict[str, Any], str]:
        """Run ``task`` here: the answer for its caller, and its code for the log."""
        try:
            if task.deadline is not None and task.deadline <= time.monotonic():
                raise DeadlineExceeded(
                    f"task {task.task_id} reached host {self._host} after its deadline",
                    reason=Reason.TASK_DEADLINE_EXCEEDED,
                )
            if task.agent not in self._supervisor.agents:
                raise NotFound(
                    f"agent {task.agent!r} is no longer deployed on host {self._host}",
                    reason=Reason.AGENT_NOT_FOUND,
                )
            sink = None if events is None else events.put_nowait
            result = await self._dispatcher.execute(task, sink, from_cluster=True)
            return {"task_id": task.task_id, "result": result_json(result)}, result.status
        except EtherError as error:
            return {"task_id": task.task_id, "error": error_json(error)}, error.code.value

    async def _send_events(
        self, reply_to: str, task_id: str, events: asyncio.Queue[TaskEvent | None]
    ) -> None:
        while (event := await events.get()) is not None:
            value = {
                "task_id": task_id,
                "kind": event.kind,
                "payload": event.payload,
                "time": event.time,
            }
            try:
                await self._redis.xadd(
                    reply_to, {"event": orjson.dumps(value)}, maxlen=STREAM_LENGTH
                )
            except self._errors as error:
                log.warning(
                    "cluster: could not send a task event", task_id=task_id, error=str(error)
                )

    async def _follow_cancels(self) -> None:
        while not self._stopping():
            try:
                async with self._redis.pubsub() as pubsub:
                    await pubsub.subscribe(CANCELS)
                    while not self._stopping():
                        message = await pubsub.get_message(
                            ignore_subscribe_messages=True, timeout=BLOCK_MS / 1000
                        )
                        if message is not None:
                            self._cancel_here(orjson.loads(message["data"]))
            except self._errors:
                await anyio.sleep(BLOCK_MS / 1000)

    def _cancel_here(self, order: dict[str, Any]) -> None:
        task_id = str(order.get("task_id", ""))
        if task_id in self._running:
            with contextlib.suppress(EtherError):  # it ended meanwhile
                self._dispatcher.cancel(task_id, f"{order.get('reason', '')} (on another host)")
