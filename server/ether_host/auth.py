"""Bearer-token identities.

A token file holds one token per line: ``NAME TOKEN [RIGHT,RIGHT...]``. Blank
lines and lines starting with ``#`` are skipped. Rights default to ``*`` (all);
later features check them (for instance ``terminal.write``).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path


class TokenFileError(Exception):
    """The token file cannot be used; the host refuses to start."""


@dataclass(frozen=True)
class Identity:
    """Who is calling: a token's name, or ``local`` when auth is off."""

    name: str
    rights: frozenset[str] = frozenset({"*"})

    def may(self, right: str) -> bool:
        """True when this identity holds ``right`` (or every right)."""
        return "*" in self.rights or right in self.rights


LOCAL = Identity("local")


class TokenTable:
    """Looks up identities by bearer token in constant time per token."""

    def __init__(self, identities: dict[str, Identity]) -> None:
        self._by_token = identities

    def __len__(self) -> int:
        return len(self._by_token)

    def identify(self, token: str) -> Identity | None:
        """The identity holding ``token``, or None."""
        found = None
        for known, identity in self._by_token.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = identity
        return found


def load_token_file(path: Path) -> TokenTable:
    """Parse a token file; raise TokenFileError naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise TokenFileError(f"cannot read token file {path}: {error.strerror}") from None
    identities: dict[str, Identity] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) not in (2, 3):
            raise TokenFileError(f"token file {path} line {number}: expected 'NAME TOKEN [RIGHTS]'")
        name, token = parts[0], parts[1]
        if len(token) < 16:
            raise TokenFileError(
                f"token file {path} line {number}: token of {name!r} is shorter than 16 characters"
            )
        rights = frozenset(parts[2].split(",")) if len(parts) == 3 else frozenset({"*"})
        identities[token] = Identity(name, rights)
    if not identities:
        raise TokenFileError(f"token file {path} holds no tokens")
    return TokenTable(identities)
