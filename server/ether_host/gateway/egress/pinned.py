"""The connection under ``net.fetch``: httpx's requests sent to the very address the host checked.

The check on a hop's addresses cannot come before the request, as the policy's other checks
do: a name looked up twice may answer differently the second time (DNS rebinding), and an
address spelt oddly may slip past a check of the text. So it lives in the network backend
itself, which resolves the name once, refuses the hop if any address is in a refused class
(``AddressRefused``), and connects to exactly the address it checked, TLS still verifying the
name. Every request gets a connection pool of its own, so no connection made for one hop
carries another. It is apart from fetch.py because it is the layer below the policy's checks
and the audit log: it speaks httpcore's interfaces, while fetch.py only hands it a policy,
reads back the address a hop used (for the hop's audit record) and turns its refusal into a
denial.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import anyio
import httpcore
import httpx

from ether_host.gateway.egress.policy import IPAddress, Policy, classify


class AddressRefused(Exception):
    def __init__(self, reason: str, address: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.address = address


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Resolves once, refuses refused address classes, connects to the address it checked."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.inner = httpcore.AnyIOBackend()
        self.address = ""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await resolve(host, port, self.policy.resolve)
        for address in addresses:
            reason = None if self.policy.address_exempt(address) else classify(address)
            if reason is not None:
                self.address = str(address)
                raise AddressRefused(reason, str(address))
        self.address = str(addresses[0])
        return await self.inner.connect_tcp(
            self.address, port, timeout, local_address, socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefused("invalid_url", path)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class PinnedTransport(httpx.AsyncBaseTransport):
    """httpx's requests over httpcore, each on a connection of its own through a fresh
    ``_PinnedBackend`` (``backend.address`` is the address the last request used)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.backend = _PinnedBackend(policy)
        self.response: httpx.Response | None = None  # the last response, set before any redirect

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        self.backend = _PinnedBackend(self.policy)
        self.response = None
        pool = httpcore.AsyncConnectionPool(
            network_backend=self.backend, max_connections=1, retries=0
        )
        try:
            answer = await pool.handle_async_request(
                httpcore.Request(
                    method=request.method,
                    url=httpcore.URL(
                        scheme=request.url.raw_scheme,
                        host=request.url.raw_host,
                        port=request.url.port,
                        target=request.url.raw_path,
                    ),
                    headers=request.headers.raw,
                    content=request.stream,
                    extensions=request.extensions,
                )
            )
        except BaseException:
            await pool.aclose()
            raise
        self.response = httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_PoolStream(answer.stream, pool),
            extensions=answer.extensions,
        )
        return self.response


class _PoolStream(httpx.AsyncByteStream):
    """A response body that closes its connection pool with it."""

    def __init__(self, stream: Any, pool: httpcore.AsyncConnectionPool) -> None:
        self.stream = stream
        self.pool = pool

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self.stream.aclose()
        finally:
            await self.pool.aclose()


async def resolve(host: str, port: int, fixed: Mapping[str, tuple[str, ...]]) -> list[IPAddress]:
    """Every address ``host`` stands for: a literal, a fixed mapping, or the system resolver's answers."""
    name = host.strip("[]").lower().rstrip(".")
    try:
        return [ipaddress.ip_address(name)]
    except ValueError:
        pass
    if name in fixed:
        return [ipaddress.ip_address(a) for a in fixed[name]]
    try:
        infos = await anyio.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise httpcore.ConnectError(f"cannot resolve {name}: {error}") from None
    found: list[IPAddress] = []
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    if not found:
        raise httpcore.ConnectError(f"cannot resolve {name}: no addresses")
    return found
