"""Error reasons are declared once: ether.v1.ErrorReason in proto/ether/v1/errors.proto.

The core cannot import generated messages, so it raises through ``ether_host.reasons.Reason``,
a mirror of the proto enum. These tests hold the mirror equal to the proto, fail on a reason
written as a string anywhere in the host, on an error raised without a reason, and on a
declared reason nothing raises; and they check that the typed details of an error reach the
status a client sees.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from google.rpc import error_details_pb2, status_pb2

from ether.v1 import errors_pb2, terminal_pb2
from ether_host import errors
from ether_host.reasons import Reason
from ether_host.transport.status import status_of

HOST = Path(__file__).resolve().parents[2] / "server" / "ether_host"
PREFIX = "ERROR_REASON_"


def _declared() -> list[str]:
    """The proto's reasons as ErrorInfo carries them: the value names without the prefix."""
    values = errors_pb2.ErrorReason.DESCRIPTOR.values
    return [v.name.removeprefix(PREFIX) for v in values if v.number != 0]


def _sources() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(HOST.rglob("*.py")):
        if path.name != "reasons.py":
            yield path, ast.parse(path.read_text(), str(path))


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _error_classes(trees: list[tuple[Path, ast.Module]]) -> set[str]:
    """EtherError and every class of the host that derives from it, by name."""
    found = {"EtherError"}
    grew = True
    while grew:
        grew = False
        for _, tree in trees:
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ClassDef)
                    and node.name not in found
                    and any(_name(base) in found for base in node.bases)
                ):
                    found.add(node.name)
                    grew = True
    return found


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(HOST.parent)}:{getattr(node, 'lineno', 0)}"


def _is_upper_snake(value: object) -> bool:
    return isinstance(value, str) and value.isupper() and value.replace("_", "").isalpha()


def test_the_core_mirror_is_the_proto_enum() -> None:
    """Reason has one member per ErrorReason value but UNSPECIFIED, by the same name, and each
    member's value is its name (the ErrorInfo.reason string)."""
    assert [member.name for member in Reason] == _declared()
    assert all(member.value == member.name for member in Reason)


def test_errors_are_raised_through_the_names() -> None:
    """Every EtherError the host builds passes a reason, never as a string literal; and no
    ``reason=`` anywhere in the host is an UPPER_SNAKE literal (an ErrorInfo built by hand, an
    error class held in a variable)."""
    trees = list(_sources())
    classes = _error_classes(trees)
    problems = []
    for path, tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            keyword = next((k for k in node.keywords if k.arg == "reason"), None)
            if keyword is not None and any(
                isinstance(c, ast.Constant) and _is_upper_snake(c.value)
                for c in ast.walk(keyword.value)
            ):
                problems.append(f"{_where(path, node)}: reason={ast.unparse(keyword.value)}")
            if _name(node.func) not in classes:
                continue
            given = keyword.value if keyword is not None else None
            if given is None and len(node.args) > 1:
                given = node.args[1]
            if given is None:
                problems.append(f"{_where(path, node)}: {_name(node.func)}(...) has no reason")
            elif keyword is None and isinstance(given, ast.Constant):
                problems.append(f"{_where(path, node)}: reason {ast.unparse(given)}")
    assert not problems, "raise reasons as Reason.NAME:\n" + "\n".join(problems)


def test_every_declared_reason_is_raised() -> None:
    """Each reason the proto declares is named somewhere in the host (Reason.NAME): the enum
    lists what a client can get, not what it once could."""
    used = set()
    for _, tree in _sources():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "Reason"
            ):
                used.add(node.attr)
    declared = set(_declared())
    assert not used - declared, f"not declared in errors.proto: {sorted(used - declared)}"
    assert not declared - used, f"declared but never raised: {sorted(declared - used)}"


def test_typed_details_reach_the_status() -> None:
    """status_of reads the error's typed fields: the reason's name in ErrorInfo, each
    QuotaViolation in a QuotaFailure, and the protobuf details a servicer attached."""
    attached = terminal_pb2.WaitForFailure(output_offset=7)
    error = errors.ResourceExhausted(
        "the input queue is full",
        reason=Reason.INPUT_QUEUE_FULL,
        quota_violations=[errors.QuotaViolation("terminal:t-1", "input queue bytes")],
        details=[attached],
    )
    proto = status_pb2.Status.FromString(
        dict(status_of(error).trailing_metadata)["grpc-status-details-bin"]
    )
    kinds = {detail.type_url.rsplit("/", 1)[1]: detail for detail in proto.details}
    info = error_details_pb2.ErrorInfo()
    kinds["google.rpc.ErrorInfo"].Unpack(info)
    assert (info.reason, info.domain) == ("INPUT_QUEUE_FULL", "ether")
    quota = error_details_pb2.QuotaFailure()
    kinds["google.rpc.QuotaFailure"].Unpack(quota)
    assert [(v.subject, v.description) for v in quota.violations] == [
        ("terminal:t-1", "input queue bytes")
    ]
    failure = terminal_pb2.WaitForFailure()
    kinds["ether.v1.WaitForFailure"].Unpack(failure)
    assert failure.output_offset == 7
