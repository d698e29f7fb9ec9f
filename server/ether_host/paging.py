"""AIP-158 pagination over an ordered list: opaque keyset page tokens, bounded page sizes.

A token names the sort key of the last item a page returned, not an offset: the next page
starts after that key wherever it now sits. An item added or removed between two page reads
therefore never makes a later page repeat or skip an item that was there all along (an
offset token did both: a run created between reads of a newest-first list came back twice).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, TypeVar

from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.reasons import Reason

T = TypeVar("T")
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000

# A sort key: a tuple of strings and numbers, unique per item of the list.
Key = tuple[str | int | float, ...]


class Page(NamedTuple, Generic[T]):
    """One page of a List: what every core list function returns, for every front to encode."""

    items: list[T]
    next_page_token: str  # '' on the last page


def _token(key: Key, scope: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([scope, list(key)]).encode()).decode()


def _after(token: str, scope: str) -> Key:
    try:
        found_scope, key = json.loads(base64.urlsafe_b64decode(token.encode()))
        valid = isinstance(key, list) and all(
            isinstance(k, str | int | float) and not isinstance(k, bool) for k in key
        )
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        found_scope, key, valid = "", [], False
    if not valid or found_scope != scope:
        raise InvalidArgument(
            "page_token was not issued by this list call; pass the next_page_token of the previous page",
            reason=Reason.INVALID_PAGE_TOKEN,
            violations=[FieldViolation("page_token", "not a token of this list")],
        )
    return tuple(key)


def page_size_of(page_size: int) -> int:
    """The number of items a page holds: 0 means the default, above the maximum clamps to it."""
    if page_size < 0:
        raise InvalidArgument(
            f"page_size {page_size} is negative; use 0 for the default of {DEFAULT_PAGE_SIZE}",
            reason=Reason.INVALID_PAGE_SIZE,
            violations=[FieldViolation("page_size", f"0 to {MAX_PAGE_SIZE}")],
        )
    return min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def paginate(
    items: Sequence[T],
    page_size: int,
    page_token: str,
    scope: str,
    key: Callable[[T], Key],
    *,
    newest_first: bool = False,
) -> Page[T]:
    """One page of ``items`` and the token of the next page ('' on the last one).

    ``key`` gives each item's unique sort key; the list is served in ascending key order, or
    descending with ``newest_first``. ``scope`` names the list and its filters, so a token is
    not reused across lists.
    """
    size = page_size_of(page_size)
    ordered = sorted(items, key=key, reverse=newest_first)
    if page_token:
        last = _after(page_token, scope)
        try:
            ordered = [i for i in ordered if (key(i) < last if newest_first else key(i) > last)]
        except TypeError:  # a token of this scope whose key has another shape
            raise InvalidArgument(
                "page_token does not fit this list; pass the next_page_token of the previous page",
                reason=Reason.INVALID_PAGE_TOKEN,
                violations=[FieldViolation("page_token", "not a token of this list")],
            ) from None
    page = ordered[:size]
    more = len(ordered) > size
    return Page(page, _token(key(page[-1]), scope) if more else "")
