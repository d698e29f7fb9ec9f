"""Who is calling: identities from bearer tokens and client certificates.

The credentials file (``auth_tokens_file``) holds one credential per line:
``NAME CREDENTIAL [RIGHT,RIGHT...]``. A credential is a bearer token (16 characters or more)
or ``cert:SUBJECT``, a client certificate whose subject common name or one of whose subject
alternative names (DNS name, e-mail, URI or IP address) is SUBJECT; the host accepts only
certificates signed by its ``tls.client_ca``. Blank lines and lines starting with ``#`` are
skipped. Rights default to ``*`` (all); rights.py lists them and which RPC needs which.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

CERT_PREFIX = "cert:"


class TokenFileError(Exception):
    """The credentials file cannot be used; the host refuses to start."""


@dataclass(frozen=True)
class Identity:
    """Who is calling: a credential's name, or ``local`` when auth is off."""

    name: str
    rights: frozenset[str] = frozenset({"*"})

    def may(self, right: str, scope: str = "") -> bool:
        """True when this identity holds ``right`` (or every right, or ``right:scope``)."""
        rights = self.rights
        return "*" in rights or right in rights or (bool(scope) and f"{right}:{scope}" in rights)


LOCAL = Identity("local")


def both(token: Identity, certificate: Identity) -> Identity | str:
    """The caller when a call must carry a token and a certificate: both must name the same
    identity, which then holds only the rights both lines grant; else why not."""
    if token.name != certificate.name:
        return (
            f"the bearer token is {token.name!r}'s but the client certificate is "
            f"{certificate.name!r}'s: both must belong to one identity"
        )
    if "*" in token.rights:
        return certificate
    if "*" in certificate.rights:
        return token
    return Identity(token.name, token.rights & certificate.rights)


class TokenTable:
    """Looks up identities by bearer token (in constant time per token) or by the names a
    verified client certificate carries."""

    def __init__(
        self, identities: dict[str, Identity], certificates: dict[str, Identity] | None = None
    ) -> None:
        self._by_token = identities
        self._by_subject = certificates or {}

    def __len__(self) -> int:
        return len(self._by_token) + len(self._by_subject)

    @property
    def has_tokens(self) -> bool:
        return bool(self._by_token)

    @property
    def has_certificates(self) -> bool:
        return bool(self._by_subject)

    def identify(self, token: str) -> Identity | None:
        """The identity holding ``token``, or None."""
        found = None
        for known, identity in self._by_token.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = identity
        return found

    def identify_certificate(self, subjects: Iterable[str]) -> Identity | None:
        """The identity of a verified certificate: the first of its names (common name, then
        alternative names) that a ``cert:`` line names, or None."""
        for subject in subjects:
            identity = self._by_subject.get(subject)
            if identity is not None:
                return identity
        return None


def bearer_identity(tokens: TokenTable, values: list[str], carrier: str) -> Identity | str:
    """The identity of the ``authorization`` values a call carried (gRPC metadata or HTTP
    headers, named by ``carrier`` in the reasons), or why it has none: one rule for every
    transport."""
    if not values:
        return f"missing bearer token: send the {carrier} 'authorization: Bearer <token>'"
    scheme, _, token = values[0].partition(" ")
    if scheme.lower() != "bearer" or not token:
        return f"malformed authorization {carrier}: expected 'Bearer <token>'"
    identity = tokens.identify(token.strip())
    if identity is None:
        return "invalid bearer token: it matches no token in the host's token file"
    return identity


def load_token_file(path: Path) -> TokenTable:
    """Parse a credentials file; raise TokenFileError naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise TokenFileError(f"cannot read token file {path}: {error.strerror}") from None
    identities: dict[str, Identity] = {}
    certificates: dict[str, Identity] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) not in (2, 3):
            raise TokenFileError(
                f"token file {path} line {number}: expected 'NAME TOKEN [RIGHTS]' "
                "or 'NAME cert:SUBJECT [RIGHTS]'"
            )
        name, credential = parts[0], parts[1]
        rights = frozenset(parts[2].split(",")) if len(parts) == 3 else frozenset({"*"})
        if credential.startswith(CERT_PREFIX):
            subject = credential[len(CERT_PREFIX) :]
            if not subject:
                raise TokenFileError(
                    f"token file {path} line {number}: 'cert:' needs the certificate's common "
                    "name or alternative name after it"
                )
            if subject in certificates:
                raise TokenFileError(
                    f"token file {path} line {number}: certificate subject {subject!r} is "
                    f"already {certificates[subject].name!r}'s"
                )
            certificates[subject] = Identity(name, rights)
            continue
        if len(credential) < 16:
            raise TokenFileError(
                f"token file {path} line {number}: token of {name!r} is shorter than 16 characters"
            )
        identities[credential] = Identity(name, rights)
    if not identities and not certificates:
        raise TokenFileError(f"token file {path} holds no tokens")
    return TokenTable(identities, certificates)
