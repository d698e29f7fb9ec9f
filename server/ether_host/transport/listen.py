"""Listening addresses: loopback checks, unix socket directories, TLS, clear bind errors."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import stat
from pathlib import Path

import grpc


class ListenError(Exception):
    """The host cannot listen where it was asked to; the message says why."""


def split_host_port(address: str) -> tuple[str, int]:
    """Split ``host:port`` / ``[v6]:port``; raise ListenError on nonsense."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or not host:
        raise ListenError(f"listen: {address!r} is not HOST:PORT (for example 127.0.0.1:50051)")
    port = int(port_text)
    if port > 65535:
        raise ListenError(f"listen: port {port} is out of range 0..65535")
    return host.strip("[]"), port


def is_loopback(host: str) -> bool:
    """True when every address ``host`` names is a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def _read_pem(key: str, path_text: str) -> bytes:
    try:
        data = Path(path_text).read_bytes()
    except OSError as error:
        raise ListenError(f"{key}: cannot read {path_text}: {error.strerror}") from None
    if b"-----BEGIN " not in data:
        raise ListenError(f"{key}: {path_text} is not PEM (expected '-----BEGIN ...')")
    return data


def server_credentials(cert: str, key: str, client_ca: str) -> grpc.ServerCredentials | None:
    """TLS credentials from PEM files, or None for plaintext. With ``client_ca`` the handshake
    requires a client certificate signed by it: a client without one, with one of another CA or
    an expired one never reaches a method (UNAVAILABLE on its side, nothing to log on ours)."""
    if not (cert or key or client_ca):
        return None
    if not (cert and key):
        raise ListenError(
            "tls: cert and key are both needed (tls_cert and tls_key, PEM files); "
            "client_ca alone cannot serve TLS"
        )
    chain = _read_pem("tls.cert", cert)
    private_key = _read_pem("tls.key", key)
    roots = _read_pem("tls.client_ca", client_ca) if client_ca else None
    return grpc.ssl_server_credentials(
        [(private_key, chain)], root_certificates=roots, require_client_auth=roots is not None
    )


def _port_in_use(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as error:
            return error.errno == errno.EADDRINUSE
    return False


def bind_tcp(
    server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None = None
) -> str:
    """Bind ``address`` (with TLS when given ``credentials``); return ``host:port`` with the
    real port."""
    host, port = split_host_port(address)
    try:
        if credentials is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, credentials)
    except RuntimeError:
        bound = 0
    if not bound:
        if port and _port_in_use(host, port):
            raise ListenError(
                f"{address}: address in use (another process listens there; choose another --listen)"
            )
        raise ListenError(f"{address}: cannot listen there (is {host} an address of this machine?)")
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{bound}"


def prepare_unix_socket(path_text: str) -> Path:
    """Create the socket's directory with mode 0700; refuse a shared directory."""
    path = Path(path_text).absolute()
    directory = path.parent
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.stat()
    if info.st_uid != os.getuid():
        raise ListenError(
            f"unix_socket: directory {directory} belongs to another user; use a private directory"
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(directory, 0o700)
    if path.exists():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(path))
            except OSError:
                path.unlink()  # a stale socket of a host that is gone
            else:
                raise ListenError(
                    f"unix_socket: {path}: address in use (another host serves this socket)"
                )
    return path


def bind_unix(server: grpc.aio.Server, path_text: str) -> str:
    """Bind a unix socket inside a 0700 directory and return its address."""
    path = prepare_unix_socket(path_text)
    address = f"unix:{path}"
    try:
        server.add_insecure_port(address)
    except RuntimeError:
        raise ListenError(f"unix_socket: cannot listen on {path}") from None
    return address
