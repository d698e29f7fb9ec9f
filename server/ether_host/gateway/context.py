"""A session's context: a versioned JSON object that clients and agents share.

Every write is one atomic step on the event loop: it checks the expected
version (compare-and-set), computes the new document, checks its size, and
only then replaces the old one. A write that changes nothing keeps the
version and tells nobody. Each real change gets the next version and is
kept in a bounded history, so watchers can resume after a version.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ether_host.bus import History
from ether_host.errors import Aborted, FieldViolation, InvalidArgument, ResourceExhausted
from ether_host.reasons import Reason
from ether_host.value_levels import MAX_VALUE_LEVELS, OBJECT_LEVELS, nests_too_deep

SET, MERGE_PATCH, REMOVE, REPLACE = "set", "merge_patch", "remove", "replace"


@dataclass(frozen=True)
class Change:
    """One change: the version it made, the top-level keys it touched and their new values."""

    version: int
    keys: tuple[str, ...]
    values: dict[str, Any]
    author: str
    time: float = field(default_factory=time.time)


def canonical(value: Any) -> str:
    """JSON text that compares equal exactly when the values are equal as JSON (1 != true)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Context:
    """The blackboard of one session."""

    def __init__(
        self,
        initial: dict[str, Any],
        *,
        max_bytes: int,
        history: int,
        on_change: Callable[[Change], None] | None = None,
    ) -> None:
        if json_size(initial) > max_bytes:
            raise _too_large(json_size(initial), max_bytes)
        _check_depth(initial, initial, "context")
        self._document = copy.deepcopy(initial)
        self.version = 1
        self.updated_at = time.time()
        self.max_bytes = max_bytes
        self.changes: History[Change] = History(history)
        self._on_change = on_change
        self.closed = False

    @property
    def document(self) -> dict[str, Any]:
        """The document itself, not a copy: read it, never change it (a write replaces it)."""
        return self._document

    def restore(
        self, document: dict[str, Any], version: int, updated_at: float, changes: list[Change]
    ) -> None:
        """Continue a stored context: its document at ``version`` and the changes kept before
        it (they count only when they run up to ``version`` without a gap)."""
        self._document = document
        self.version = version
        self.updated_at = updated_at
        kept = [c for c in changes if c.version <= version]
        if (
            not kept
            or kept[-1].version != version
            or any(b.version != a.version + 1 for a, b in itertools.pairwise(kept))
        ):
            kept = []  # watchers resuming before `version` get a snapshot instead
        # change n has history sequence n - 1 (the document at version 1 is no change)
        self.changes.restore([(c.version - 1, c) for c in kept], version - 1)

    def snapshot(self, keys: list[str] | None = None) -> dict[str, Any]:
        """A deep copy of the document, or of the named top-level keys that exist."""
        if keys:
            return {k: copy.deepcopy(self._document[k]) for k in keys if k in self._document}
        return copy.deepcopy(self._document)

    def update(
        self, kind: str, value: Any, author: str, expected_version: int | None = None
    ) -> Change:
        """Apply one change atomically; ABORTED on a stale expected_version, nothing changed."""
        if expected_version is not None and expected_version != self.version:
            raise Aborted(
                f"the context is at version {self.version}, not {expected_version}; nothing was changed: "
                "read it again and retry",
                reason=Reason.VERSION_CONFLICT,
                metadata={
                    "current_version": str(self.version),
                    "expected_version": str(expected_version),
                },
            )
        new = self._apply(kind, value)
        changed = sorted(
            k
            for k in set(self._document) | set(new)
            if k not in self._document
            or k not in new
            or canonical(self._document[k]) != canonical(new[k])
        )
        if not changed:
            return Change(self.version, (), {}, author)
        size = json_size(new)
        if size > self.max_bytes:
            raise _too_large(size, self.max_bytes)
        _check_depth(new, changed, kind)
        self._document = new
        self.version += 1
        self.updated_at = time.time()
        change = Change(
            self.version,
            tuple(changed),
            {k: copy.deepcopy(new[k]) for k in changed if k in new},
            author,
        )
        self.changes.append(change)
        if self._on_change is not None:
            self._on_change(change)
        return change

    def _apply(self, kind: str, value: Any) -> dict[str, Any]:
        if kind == SET:
            _check_keys(value, "set")
            return {**self._document, **copy.deepcopy(value)}
        if kind == MERGE_PATCH:
            if not isinstance(value, dict):
                raise InvalidArgument(
                    "merge_patch must be a JSON object",
                    reason=Reason.INVALID_UPDATE,
                    violations=[FieldViolation("merge_patch", "a JSON object")],
                )
            _check_keys(value, "merge_patch")
            patched = merge_patch(self._document, value)
            assert isinstance(patched, dict)
            return patched
        if kind == REMOVE:
            if not isinstance(value, list) or not all(isinstance(k, str) and k for k in value):
                raise InvalidArgument(
                    "remove needs a list of non-empty keys",
                    reason=Reason.INVALID_UPDATE,
                    violations=[FieldViolation("remove.keys", "non-empty strings")],
                )
            return {k: v for k, v in self._document.items() if k not in set(value)}
        if kind == REPLACE:
            _check_keys(value, "replace")
            return copy.deepcopy(value)
        raise InvalidArgument(
            "no update: set one of set, merge_patch, remove or replace",
            reason=Reason.MISSING_UPDATE,
            violations=[FieldViolation("update", "required")],
        )

    def first_retained_version(self) -> int:
        """The oldest version a watcher can resume after and still see every change."""
        held = self.changes.since(0)
        return held[0][1].version - 1 if held else self.version

    async def follow(self, after_version: int, until: Callable[[], bool]) -> AsyncIterator[Change]:
        """Changes with a version above ``after_version``, then new ones, until ``until()``."""
        after = max(0, after_version - 1)  # change n has history sequence n - 1
        async for _, change in self.changes.follow(after, until=until):
            if change.version > after_version:
                yield change

    def close(self) -> None:
        self.closed = True
        self.changes.close()


def _check_keys(value: Any, what: str) -> None:
    if not isinstance(value, dict):
        raise InvalidArgument(
            f"{what} must be a JSON object",
            reason=Reason.INVALID_UPDATE,
            violations=[FieldViolation(what, "a JSON object")],
        )
    if any(not key for key in value):
        raise InvalidArgument(
            "context keys must not be empty",
            reason=Reason.EMPTY_KEY,
            violations=[FieldViolation(what, "an empty key")],
        )


def _check_depth(document: dict[str, Any], keys: Any, field: str) -> None:
    """INVALID_ARGUMENT when one of ``keys`` of ``document`` nests deeper than a Value can carry:
    clients read the context as a Struct (GetContext, WatchContext), and one they could not
    decode would make every later read of the session fail."""
    for key in keys:
        if key in document and nests_too_deep(document[key], OBJECT_LEVELS):
            raise InvalidArgument(
                f"the context's key {key!r} would nest objects and lists deeper than a protobuf "
                f"Value can carry to a client (at most {MAX_VALUE_LEVELS} levels: an object "
                f"takes {OBJECT_LEVELS}, a list 2, the context itself an object); nothing was "
                "changed: keep the data flatter, or store it as a JSON string",
                reason=Reason.CONTEXT_TOO_DEEP,
                metadata={"key": key, "limit": str(MAX_VALUE_LEVELS)},
                violations=[FieldViolation(f"{field}.{key}", "nests too deep for a Value")],
            )


def _too_large(size: int, limit: int) -> ResourceExhausted:
    return ResourceExhausted(
        f"the context would be {size} bytes as JSON, over the limit of {limit} bytes; nothing was changed",
        reason=Reason.CONTEXT_TOO_LARGE,
        metadata={"size": str(size), "limit": str(limit)},
    )
