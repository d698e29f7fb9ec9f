"""The output buffer: a ring numbered by byte offset that keeps the newest ``capacity`` bytes,
filled by reads straight from a file descriptor or by appends."""

from __future__ import annotations

import os
import random

import pytest

from ether_host.terminals.buffer import INITIAL, OutputBuffer


@pytest.mark.parametrize("capacity", [64 * 1024, 100_000, 1024 * 1024])
def test_the_buffer_holds_exactly_the_newest_bytes_whatever_the_mix_of_reads_and_appends(
    capacity: int,
) -> None:
    """Random reads from a pipe and appends of every size, checked against a plain bytearray:
    offsets count every byte, the newest `capacity` bytes (or all, before that) are held and read
    back intact across the ring's wrap, and `find` sees exactly the held bytes from an offset."""
    buffer = OutputBuffer(capacity)
    expected = bytearray()
    rng = random.Random(capacity)
    reader, writer = os.pipe()
    os.set_blocking(reader, False)
    try:
        for _ in range(600):
            data = rng.randbytes(rng.choice([1, 100, 3000, 5000, 70_000]))
            if rng.random() < 0.5 and len(data) <= 60_000:
                os.write(writer, data)
                while True:
                    try:
                        assert buffer.read_from(reader, rng.choice([100, 4096, 65536])) > 0
                    except BlockingIOError:
                        break
            else:
                buffer.append(data)
            expected += data
            assert buffer.end == len(expected)
            assert buffer.start == max(0, len(expected) - capacity)
            assert buffer.read(buffer.start, 1 << 30) == bytes(expected[buffer.start :])
            offset = rng.randint(buffer.start, buffer.end)
            assert buffer.read(offset, 777) == bytes(expected[offset : offset + 777])
            assert buffer.find(b"\x1b", offset) == (b"\x1b" in expected[offset:])
            assert buffer.held(offset) and not buffer.held(buffer.end + 1)
    finally:
        os.close(reader)
        os.close(writer)
    assert buffer.start == len(expected) - capacity  # full: exactly `capacity` bytes held


def test_a_quiet_terminal_holds_a_small_ring() -> None:
    """The ring starts small and grows only as output arrives, so an idle terminal costs little."""
    buffer = OutputBuffer(2 * 1024 * 1024)
    buffer.append(b"x" * 1000)
    assert buffer.read(0, 10) == b"x" * 10
    assert buffer.allocated == INITIAL
    buffer.append(b"y" * 100_000)
    assert INITIAL < buffer.allocated < 2 * 1024 * 1024
    assert buffer.read(0, 1 << 30) == b"x" * 1000 + b"y" * 100_000


def test_reading_before_the_held_window_starts_at_its_oldest_byte() -> None:
    """An offset older than what is held reads from the oldest byte held; past the end, nothing."""
    buffer = OutputBuffer(64 * 1024)
    buffer.append(bytes(range(256)) * 1024)  # 256 KiB into 64 KiB
    assert buffer.start == 192 * 1024
    assert buffer.read(0, 4) == bytes([0, 1, 2, 3])
    assert not buffer.held(0)
    assert buffer.read(buffer.end, 10) == b""
