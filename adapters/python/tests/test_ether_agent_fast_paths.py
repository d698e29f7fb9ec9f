"""The fast paths the runtime takes when the interpreter has them: orjson and uvloop."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import math
import sys
import uuid
from typing import Any

import pytest

from ether_agent import _io, _libc


@dataclasses.dataclass
class Point:
    x: int
    label: str = "p"


class Colour(enum.Enum):
    RED = "red"


VALUES: list[Any] = [
    {"text": "héllo ✓", "n": [1, -2, 1.5, 1e16, 2**63 - 1], "ok": True},
    {"nothing": None, "nested": {"a": [None, {"b": None}]}},
    {"nan": math.nan},
    {"inf": [math.inf]},
    {"big": 2**70, "negative_big": -(2**80)},
    {"point": Point(1)},
    {"tags": {"a"}},
    {1: "int key"},
    {"lone": "\ud800"},
    {"when": datetime.datetime(2026, 11, 23)},
    {"id": uuid.UUID(int=7), "colour": Colour.RED},
    {"object": object()},
]

LINES: list[bytes] = [
    b'{"type":"task","id":"h-1","params":{"text":"\\u00e9\\n"}}',
    b'{"a":NaN,"b":Infinity}',
    b'{"lone":"\\ud800"}',
    b'{"big":123456789012345678901234567890,"max_u64":18446744073709551615}',
    b'{"small":-9223372036854775808,"f":1.0000000000000002}',
    b"\xff\xfe",
    b'{"unterminated":',
    b"[1, 2]",
]


def _outcome(call: Any, value: Any) -> Any:
    try:
        return call(value)
    except (TypeError, ValueError) as error:
        return type(error).__name__, str(error)


def _without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_io, "_orjson", None)


@pytest.mark.parametrize("value", VALUES, ids=lambda v: next(iter(v)))
def test_encode_gives_the_same_bytes_and_errors_without_orjson(
    value: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frame is one line; NaN, unknown objects fail; sets, dataclasses, UUIDs and enums work."""
    assert _io._orjson is not None, "the test venv has orjson: the fast path must be tested"
    fast = _outcome(_io.encode, value)
    _without_orjson(monkeypatch)
    assert fast == _outcome(_io.encode, value)
    if isinstance(fast, bytes):
        assert fast.endswith(b"\n") and fast.count(b"\n") == 1


@pytest.mark.parametrize("line", LINES)
def test_decode_gives_the_same_values_and_errors_without_orjson(
    line: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Big integers stay exact, NaN and lone surrogates read as the json module reads them."""
    fast = _outcome(_io.decode, line)
    _without_orjson(monkeypatch)
    slow = _outcome(_io.decode, line)
    if isinstance(fast, tuple):  # an error: the same kind (messages differ by parser)
        assert isinstance(slow, tuple) and fast[0] == slow[0]
    else:
        assert repr(fast) == repr(slow)  # repr: NaN != NaN, and 1 == 1.0 would hide a float


def test_results_that_orjson_alone_would_get_wrong_reach_the_host_right(agent: Any) -> None:
    """Through a real agent process: a 70-bit integer in and out, UUID and set results, and a
    NaN result that is refused as not JSON."""
    child = agent(
        """
        import math, uuid
        from ether_agent import Agent
        agent = Agent("t")
        @agent.action
        async def echo(params: dict):
            return {"params": params, "id": uuid.UUID(int=7), "tags": {"a"}}
        @agent.action
        async def nan():
            return {"x": math.nan}
        """
    )
    child.send({"type": "task", "id": "h-1", "action": "echo", "params": {"n": 2**70}})
    result = child.read()
    assert result["status"] == "ok", result
    assert result["result"] == {
        "params": {"n": 2**70},
        "id": "00000000-0000-0000-0000-000000000007",
        "tags": ["a"],
    }
    child.send({"type": "task", "id": "h-2", "action": "nan", "params": {}})
    result = child.read()
    assert result["status"] == "error" and result["error"]["code"] == "internal"
    assert "not JSON" in result["error"]["message"]
    assert child.close() == 0


def test_the_loop_is_uvloop_unless_the_agent_asks_for_asyncio(agent: Any) -> None:
    """uvloop runs handlers when the interpreter has it; ETHER_AGENT_LOOP=asyncio opts out."""
    source = """
        import asyncio
        from ether_agent import Agent
        agent = Agent("t")
        @agent.action
        async def loop():
            await asyncio.sleep(0)
            return type(asyncio.get_running_loop()).__module__
        """
    for env, expected in (({}, "uvloop"), ({"ETHER_AGENT_LOOP": "asyncio"}, "asyncio")):
        child = agent(source, env=env)
        child.send({"type": "task", "id": "h-1", "action": "loop", "params": {}})
        result = child.read()
        assert result["status"] == "ok" and result["result"].split(".")[0] == expected, result
        assert child.close() == 0


def _rss_kib_of_mapping(address: int) -> int:
    """Rss of the mapping of this process that holds ``address`` (/proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(part, 16) for part in head.split("-"))
                inside = start <= address < end
            elif inside and head == "Rss:":
                return int(line.split()[1])
    raise AssertionError(f"no mapping holds {address:#x}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc are Linux's")
def test_a_uvloop_loops_idle_receive_buffer_goes_back_to_the_os() -> None:
    """uvloop's loop object embeds a 256 KiB receive buffer, zeroed (every page touched) when it
    is made: the runtime hands its zero pages back, and the loop's memory shrinks by them."""
    import uvloop

    loop = uvloop.new_event_loop()
    try:
        address = id(loop) + type(loop).__basicsize__ // 2  # inside the receive buffer
        before = _rss_kib_of_mapping(address)
        released = _libc.release_zero_pages(id(loop), type(loop).__basicsize__)
        after = _rss_kib_of_mapping(address)
        assert released >= 200 * 1024, released
        assert before - after >= 200, (before, after)
    finally:
        loop.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/pagemap is Linux's")
def test_an_idle_agents_loop_holds_no_pages_of_its_receive_buffer(agent: Any) -> None:
    """In a started agent, no page of the middle of its loop's receive buffer is in memory
    (/proc/self/pagemap's present bit), until a transport of the loop reads into it."""
    source = """
        import asyncio, os
        from ether_agent import Agent
        agent = Agent("t")

        @agent.action
        async def present() -> dict:
            loop = asyncio.get_running_loop()
            page = os.sysconf("SC_PAGE_SIZE")
            start = (id(loop) // page + 2) * page
            end = (id(loop) + type(loop).__basicsize__) // page * page - page
            fd = os.open("/proc/self/pagemap", os.O_RDONLY)
            try:
                present = sum(
                    int.from_bytes(os.pread(fd, 8, at // page * 8), "little") >> 63
                    for at in range(start, end, page)
                )
            finally:
                os.close(fd)
            return {"loop": type(loop).__module__, "pages": (end - start) // page,
                    "present": present}
        """
    child = agent(source)
    child.send({"type": "task", "id": "h-1", "action": "present", "params": {}})
    result = child.read()
    assert result["status"] == "ok", result
    assert result["result"]["loop"] == "uvloop", result
    assert result["result"]["pages"] >= 50, result
    assert result["result"]["present"] == 0, result
    assert child.close() == 0


def test_a_uvloop_transport_reads_whole_after_its_buffer_went_back(agent: Any) -> None:
    """What a handler reads through uvloop's own transports (its receive buffer's pages were
    handed back at start) arrives whole and exact, past the buffer's 256 KiB."""
    source = """
        import asyncio, hashlib, os, threading
        from ether_agent import Agent
        agent = Agent("t")

        def pattern(size):
            return bytes((i * 7 + i // 251) % 256 for i in range(size))

        @agent.action
        async def pipe_read(size: int) -> dict:
            loop = asyncio.get_running_loop()
            read_fd, write_fd = os.pipe()
            reader = asyncio.StreamReader(limit=1 << 22)
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0)
            )

            def write():
                with os.fdopen(write_fd, "wb", 0) as out:
                    out.write(pattern(size))

            writer = threading.Thread(target=write)
            writer.start()
            data = await reader.read()
            writer.join()
            transport.close()
            return {
                "loop": type(loop).__module__,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        """
    size = 1_000_003
    expected = bytes((i * 7 + i // 251) % 256 for i in range(size))
    child = agent(source)
    child.send({"type": "task", "id": "h-1", "action": "pipe_read", "params": {"size": size}})
    result = child.read(timeout=60)
    assert result["status"] == "ok", result
    assert result["result"] == {
        "loop": "uvloop",
        "size": size,
        "sha256": hashlib.sha256(expected).hexdigest(),
    }
    assert child.close() == 0
