"""``net.fetch``: an agent's HTTP request, checked against its policy, sent by the host.

Each hop (the request, then every redirect) is checked again from the top:
scheme, method, host, port, then the addresses the name resolves to. The
check on addresses happens inside the connection itself: the host resolves
the name once, refuses if any address is in a refused class, and connects to
exactly the address it checked (TLS still verifies the name), so a name that
resolves differently a moment later (DNS rebinding) or an odd spelling of an
address (``127.1``, ``0x7f000001``, ``[::ffff:127.0.0.1]``) gains nothing.
Every hop leaves one audit record, allowed or denied.

Redirects are httpx's: the client never follows them itself (``follow_redirects``
is off) and hands back the next hop as ``response.next_request``, with httpx's
method rewriting (303, and 301/302 after a POST, become GET, as browsers do),
``Authorization`` dropped for another origin and ``Cookie`` left to the fetch's
own cookie jar; the host checks and audits that request as it did the first.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

import anyio
import httpcore
import httpx
import structlog

from ether_host.config import ConfigError
from ether_host.gateway.egress.audit import ALLOWED, DENIED, AuditLog, AuditRecord
from ether_host.gateway.egress.pinned import AddressRefused, PinnedTransport
from ether_host.gateway.egress.policy import Policy, TokenBucket, build_policy

log = structlog.get_logger("ether.egress")

DROPPED_HEADERS = {
    "host",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "proxy-authorization",
    "proxy-connection",
}
MAX_HEADER_BYTES = 8 * 1024
USER_AGENT = "ether-egress/0.1"


class FetchRefused(Exception):
    """The fetch did not deliver a response: ``code`` says why (the audit reason for denials)."""

    def __init__(self, code: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after


@dataclass
class FetchRequest:
    """What an agent asked for."""

    agent: str
    url: str
    method: str = "GET"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    timeout: float | None = None  # seconds; capped by the policy
    max_bytes: int | None = None  # capped by the policy
    task_id: str = ""
    session_id: str = ""


@dataclass
class FetchResponse:
    """What came back from the last hop."""

    status: int
    headers: dict[str, str]
    body: bytes
    url: str
    redirects: int
    audit_ids: list[int]


class Egress:
    """Policies per agent, their rate limits, the fetches and their audit records."""

    def __init__(self, host_table: Mapping[str, Any], audit: AuditLog, deployment_of: Any) -> None:
        self.host_table = host_table
        self.audit = audit
        self._deployment_of = deployment_of  # agent name -> its deployment's egress table (or None)
        self._buckets: dict[str, TokenBucket] = {}
        # A bad host table stops the host at start: its defaults and each agent's own table,
        # not at the first net.fetch of that agent.
        build_policy("*", host_table, None)
        per_agent = host_table.get("agents") or {}
        if not isinstance(per_agent, Mapping):
            raise ConfigError("[gateway.egress.agents] must be a table of tables, one per agent")
        for agent, table in per_agent.items():
            if not isinstance(table, Mapping):
                raise ConfigError(f"[gateway.egress.agents.{agent}] must be a table")
            build_policy(str(agent), host_table, None)

    def policy(self, agent: str) -> Policy:
        return build_policy(agent, self.host_table, self._deployment_of(agent))

    def _bucket(self, policy: Policy) -> TokenBucket:
        bucket = self._buckets.get(policy.agent)
        if bucket is None or (bucket.rate, bucket.burst) != (policy.rate, policy.burst):
            bucket = self._buckets[policy.agent] = TokenBucket(policy.rate, policy.burst)
        return bucket

    async def fetch(self, request: FetchRequest) -> FetchResponse:
        method = request.method.upper() or "GET"
        base = AuditRecord(
            agent=request.agent,
            method=method,
            url=request.url[:2048],
            host="",
            port=0,
            decision=DENIED,
            reason="",
            task_id=request.task_id,
            session_id=request.session_id,
            request_bytes=len(request.body),
        )
        try:
            policy = self.policy(request.agent)
        except ConfigError as error:
            await self._deny(base, "policy_error", str(error))
        try:
            url = httpx.URL(request.url)
        except (httpx.InvalidURL, TypeError) as error:
            await self._deny(base, "invalid_url", f"not a valid URL: {error}")
        limit = min(policy.max_response_bytes, request.max_bytes or policy.max_response_bytes)
        timeout = min(policy.timeout, request.timeout or policy.timeout)
        deadline = time.monotonic() + timeout
        audit_ids: list[int] = []
        depth = 0
        transport = PinnedTransport(policy)
        async with httpx.AsyncClient(
            transport=transport, follow_redirects=False, trust_env=False
        ) as client:
            for name in ("accept", "accept-encoding", "connection"):
                del client.headers[name]  # the agent's headers only, as it wrote them
            client.headers["user-agent"] = USER_AGENT
            hop = client.build_request(
                method, url, headers=_headers(request.headers), content=request.body
            )
            while True:
                body = await hop.aread()
                record = replace(
                    base,
                    method=hop.method,
                    url=_redacted(hop.url),
                    host=hop.url.host,
                    port=_port(hop.url),
                    redirect_depth=depth,
                    request_bytes=len(body),
                )
                await self._precheck(
                    policy, hop.url, hop.method, body, _sent_headers(hop), record, first=depth == 0
                )
                response, record = await self._send(
                    client, transport, policy, hop, record, limit, deadline
                )
                audit_ids.append(record.id)
                following = response.next_request
                if following is None:
                    return FetchResponse(
                        response.status,
                        response.headers,
                        response.body,
                        str(hop.url),
                        depth,
                        audit_ids,
                    )
                depth += 1
                if depth > policy.max_redirects:
                    await self._deny(
                        replace(
                            base,
                            method=following.method,
                            url=_redacted(following.url),
                            host=following.url.host,
                            port=_port(following.url),
                            redirect_depth=depth,
                        ),
                        "too_many_redirects",
                        f"more than {policy.max_redirects} redirects",
                        rule="max_redirects",
                    )
                hop = following

    async def _precheck(
        self,
        policy: Policy,
        url: httpx.URL,
        method: str,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        record: AuditRecord,
        *,
        first: bool,
    ) -> None:
        if url.scheme not in ("http", "https"):
            await self._deny(
                record, "scheme_not_allowed", f"scheme {url.scheme!r} is not http or https"
            )
        if url.userinfo:
            await self._deny(
                record, "invalid_url", "credentials in the URL are never sent; use a header"
            )
        if method not in policy.allow_methods:
            await self._deny(
                record,
                "method_not_allowed",
                f"method {method} is not allowed (allowed: {', '.join(sorted(policy.allow_methods))})",
                rule="allow_methods",
            )
        rule = policy.host_rule(url.host)
        if rule is None:
            what = (
                "no host is allowed (deny by default)"
                if not policy.allow_hosts
                else f"allowed hosts: {', '.join(policy.allow_hosts)}"
            )
            await self._deny(
                record,
                "host_not_allowed",
                f"host {url.host!r} is not allowed; {what}",
                rule=f"allow_hosts ({policy.origin})",
            )
        if policy.allow_ports and _port(url) not in policy.allow_ports:
            await self._deny(
                record, "port_not_allowed", f"port {_port(url)} is not allowed", rule="allow_ports"
            )
        if len(body) > policy.max_request_bytes:
            await self._deny(
                record,
                "request_too_large",
                f"the request body is {len(body)} bytes, over {policy.max_request_bytes}",
                rule="max_request_bytes",
            )
        if sum(len(k) + len(v) for k, v in headers) > MAX_HEADER_BYTES:
            await self._deny(
                record, "headers_too_large", f"request headers exceed {MAX_HEADER_BYTES} bytes"
            )
        if first:
            wait = self._bucket(policy).take()
            if wait:
                await self._deny(
                    record,
                    "rate_limited",
                    f"rate limit of {policy.rate:g}/s (burst {policy.burst}) reached; "
                    f"retry in {wait:.1f}s",
                    rule="rate",
                    retry_after=wait,
                )

    async def _send(
        self,
        client: httpx.AsyncClient,
        transport: PinnedTransport,
        policy: Policy,
        hop: httpx.Request,
        record: AuditRecord,
        limit: int,
        deadline: float,
    ) -> tuple[_Response, AuditRecord]:
        url, method = hop.url, hop.method
        started = time.monotonic()
        left = max(0.0, deadline - started)
        rule = f"allow_hosts {policy.host_rule(url.host)!r} ({policy.origin})"
        hop.extensions["timeout"] = {"connect": left, "read": left, "write": left, "pool": left}
        status, received = 0, bytearray()
        response_headers: dict[str, str] = {}
        following: httpx.Request | None = None

        def so_far() -> AuditRecord:
            """The audit record as of now: the address used and what was received so far."""
            return replace(
                record,
                resolved_address=transport.backend.address,
                status_code=status,
                response_bytes=len(received),
                duration=time.monotonic() - started,
            )

        try:
            await self.audit.check_writable()  # the hop's record must be writable before it leaves
        except Exception as error:
            log.error(
                "audit log not writable; refusing the fetch", agent=record.agent, error=str(error)
            )
            raise FetchRefused(
                "audit_unavailable", "the egress audit log cannot be written; nothing was sent"
            ) from None
        try:
            with anyio.fail_after(left):
                try:
                    response = await client.send(hop, stream=True)
                except httpx.RemoteProtocolError as error:
                    if transport.response is None:
                        raise
                    # httpx could not make the next request of a redirect: a Location that
                    # is not a URL. The hop itself was made and answered.
                    status = transport.response.status_code
                    await self._write(
                        replace(
                            so_far(),
                            decision=ALLOWED,
                            reason="allowed",
                            rule=rule,
                            error=str(error)[:500],
                        ),
                        sent=True,
                    )
                    raise FetchRefused(
                        "invalid_redirect",
                        f"{method} {url.host} answered {status} with a Location that is not a "
                        f"URL ({transport.response.headers.get('location', '')[:200]!r}): {error}",
                    ) from None
                try:
                    status = response.status_code
                    response_headers = _response_headers(response.headers.raw)
                    async for chunk in response.aiter_raw():
                        received.extend(chunk)
                        if len(received) > limit:
                            raise _TooLarge
                finally:
                    await response.aclose()
                following = response.next_request
        except AddressRefused as refused:
            await self._deny(
                replace(record, resolved_address=refused.address),
                refused.reason,
                f"{url.host} resolves to {refused.address}, a {refused.reason.replace('_', ' ')}; "
                "only addresses in allow_addresses may be reached that way",
                rule="allow_addresses",
            )
        except _TooLarge:
            await self._deny(
                so_far(),
                "response_too_large",
                f"the response exceeds {limit} bytes",
                rule="max_response_bytes",
            )
        except TimeoutError:
            await self._deny(
                so_far(),
                "timeout",
                f"no complete response within {left:.1f}s",
                rule="timeout",
            )
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), contextlib.suppress(FetchRefused):
                await self._write(
                    replace(
                        so_far(),
                        decision=ALLOWED,
                        reason="allowed",
                        rule=rule,
                        error="cancelled: the task that asked ended",
                    )
                )
            raise
        except (
            httpcore.TimeoutException,
            httpcore.NetworkError,
            httpcore.ProtocolError,
            httpcore.UnsupportedProtocol,
            httpx.TransportError,
            OSError,
        ) as error:
            text = str(error) or type(error).__name__
            failed = replace(
                record,
                decision=ALLOWED,
                reason="allowed",
                rule=rule,
                resolved_address=transport.backend.address,
                duration=time.monotonic() - started,
                error=text[:500],
            )
            await self._write(failed)
            raise FetchRefused("fetch_failed", f"{method} {url.host}: {text}") from None
        done = replace(so_far(), decision=ALLOWED, reason="allowed", rule=rule)
        stored = await self._write(done, sent=True)
        return _Response(status, response_headers, bytes(received), following), stored

    async def _deny(
        self,
        record: AuditRecord,
        reason: str,
        message: str,
        rule: str = "",
        retry_after: float | None = None,
    ) -> NoReturn:
        """Write the denial, then refuse the fetch (always raises)."""
        await self._write(
            replace(record, decision=DENIED, reason=reason, rule=rule or record.rule, error="")
        )
        log.info("egress denied", agent=record.agent, url=record.url, reason=reason)
        raise FetchRefused(reason, f"net.fetch refused ({reason}): {message}", retry_after)

    async def _write(self, record: AuditRecord, sent: bool = False) -> AuditRecord:
        """Store ``record``; a failure refuses the fetch (``sent``: the hop's request left, its
        log checked writable just before, and the answer is withheld)."""
        try:
            return await self.audit.write(record)
        except Exception as error:  # fail closed whatever the store says
            log.error(
                "audit write failed; refusing the fetch", agent=record.agent, error=str(error)
            )
            message = "the egress audit log cannot be written; nothing was fetched"
            if sent:
                message = (
                    "the egress audit log could not be written once the request was answered "
                    "(it could just before the request was sent): the answer is withheld"
                )
            raise FetchRefused("audit_unavailable", message) from None


class _TooLarge(Exception):
    pass


@dataclass
class _Response:
    status: int
    headers: dict[str, str]
    body: bytes
    next_request: httpx.Request | None  # httpx's next hop when this one is a redirect


def _port(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def _redacted(url: httpx.URL) -> str:
    return str(url.copy_with(username=None, password=None))[:2048]


def _headers(raw: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    out = []
    for key, value in raw.items():
        name = str(key).strip()
        if not name or name.lower() in DROPPED_HEADERS or "\n" in name or "\r" in name:
            continue
        text = str(value)
        if "\n" in text or "\r" in text:
            continue
        out.append((name.encode("latin-1", "replace"), text.encode("latin-1", "replace")))
    return out


def _sent_headers(request: httpx.Request) -> list[tuple[bytes, bytes]]:
    """The headers a hop sends besides Host and the content length."""
    return [(k, v) for k, v in request.headers.raw if k.lower() not in (b"host", b"content-length")]


def _response_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in raw:
        name = key.decode("latin-1").lower()
        text = value.decode("latin-1")
        out[name] = f"{out[name]}, {text}" if name in out else text
    return out
