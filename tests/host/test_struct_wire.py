"""The C converter's own reading of bytes and its build (transport/_struct_wire.c). What it
reads and writes is held to the Python converter's values and to json_format in
test_convert.py, which runs every case through both."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import struct_pb2

from ether_host.transport import struct_values


def test_bytes_are_read_by_protobuf_rules_and_malformed_ones_refused() -> None:
    """Fields a Struct does not have are skipped (a newer sender's), a repeated member of a
    Value's oneof is the last one (protobuf's rule), and bytes that are not a Struct raise
    ValueError, never a crash or a partial value."""
    from ether_host.transport import _struct_wire

    entry = b"\x0a\x01k" + b"\x12\x04\x1a\x02hi"  # key "k", Value string_value "hi"
    unknown = b"\x48\x07" + b"\x51" + b"\x00" * 8  # field 9 varint, field 10 fixed64
    assert _struct_wire.struct_to_dict(b"\x0a" + bytes([len(entry)]) + entry + unknown) == {
        "k": "hi"
    }
    # string then bool in one Value: the bool was written last
    assert _struct_wire.value_to_python(b"\x1a\x01x\x20\x01") is True
    for malformed in [
        b"\x0a\x05\x0a\x01",  # a length past the end
        b"\x0a\x03\x12\x01\x11",  # a number cut short
        b"\x0a\x02\x12\xff",  # a varint that never ends
        b"\x0b",  # a group
        b"\x0a\x04\x0a\x02\xff\xfe",  # a key that is not UTF-8
    ]:
        with pytest.raises(ValueError):
            _struct_wire.struct_to_dict(malformed)
        # the same Struct as an item's struct_value, in a repeated Value field (number 6)
        item = b"\x2a" + bytes([len(malformed)]) + malformed
        with pytest.raises(ValueError):
            _struct_wire.repeated_values(b"\x32" + bytes([len(item)]) + item, 6)
    # the field's number is checked, not written as a broken tag
    for number in (0, -1, 2**29):
        with pytest.raises(ValueError):
            _struct_wire.repeated_value_bytes(["x"], number)


def test_it_is_built_and_the_host_uses_it() -> None:
    """`make setup` builds the C converter (a C compiler is one of the things it installs);
    a host that had silently fallen back to the Python one would have lost the fast path."""
    assert struct_values.NATIVE is not None, "server/setup.py did not build _struct_wire.c"
    assert struct_values.struct_to_dict is struct_values.NATIVE.struct_to_dict
    assert struct_values.fill_value is struct_values.NATIVE.fill_value


def test_containers_changed_while_written_do_not_crash_the_host() -> None:
    """A dict subclass runs Python code while it is written (the general path); if that code
    changes the containers being written, the converter writes what it finds or raises, and
    never reads freed memory (the host would die with every agent in it)."""
    outer: dict[str, Any] = {}
    items: list[Any] = []

    class Meddling(dict[str, Any]):
        def keys(self) -> Any:  # dict(value) calls it
            outer.clear()
            items.clear()
            outer.update({f"new {i}": "x" * 100 for i in range(50)})
            return super().keys()

    outer.update({"a": Meddling(k=1), "b": "kept?", "c": list(range(100))})
    items.extend([Meddling(k=2), *range(100)])
    for value in (outer, {"l": items}):
        target = struct_pb2.Value()
        try:
            struct_values.fill_value(target, value, 0)
        except RuntimeError:
            continue  # "dictionary changed size during iteration" is an answer too
        assert struct_values.value_to_python(target) is not None
