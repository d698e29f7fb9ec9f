"""AIP-158 pagination over an ordered list: opaque page tokens, bounded page sizes."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import TypeVar

from ether_host.errors import FieldViolation, InvalidArgument

T = TypeVar("T")
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


def _token(offset: int, scope: str) -> str:
    return base64.urlsafe_b64encode(f"{scope}:{offset}".encode()).decode()


def _offset(token: str, scope: str) -> int:
    try:
        found_scope, _, text = base64.urlsafe_b64decode(token.encode()).decode().rpartition(":")
        offset = int(text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        offset, found_scope = -1, ""
    if found_scope != scope or offset < 0:
        raise InvalidArgument(
            "page_token was not issued by this list call; pass the next_page_token of the previous page",
            reason="INVALID_PAGE_TOKEN",
            violations=[FieldViolation("page_token", "not a token of this list")],
        )
    return offset


def paginate(
    items: Sequence[T], page_size: int, page_token: str, scope: str
) -> tuple[list[T], str]:
    """One page of ``items`` and the token of the next page ('' on the last one).

    ``scope`` names the list and its filters, so a token is not reused across lists.
    """
    if page_size < 0:
        raise InvalidArgument(
            f"page_size {page_size} is negative; use 0 for the default of {DEFAULT_PAGE_SIZE}",
            reason="INVALID_PAGE_SIZE",
            violations=[FieldViolation("page_size", f"0 to {MAX_PAGE_SIZE}")],
        )
    size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    start = _offset(page_token, scope) if page_token else 0
    page = list(items[start : start + size])
    end = start + len(page)
    return page, _token(end, scope) if end < len(items) else ""
