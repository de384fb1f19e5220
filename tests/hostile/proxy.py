"""Tiny local proxies for the proxy tests: an HTTP forward proxy and a SOCKS5 server.

Both listen on 127.0.0.1 port 0, log every request they relay, and connect only to targets
their ``names`` table maps (host name or literal -> 127.0.0.1 address); anything else is
refused, so a proxied crawl can never reach beyond the machine, and a name is never looked up.

* :class:`HttpProxy`: absolute-form requests (``GET http://host:port/path HTTP/1.1``) are
  forwarded in origin form with ``Connection: close``; ``CONNECT host:port`` opens a tunnel
  (for https). Refused targets get ``502 Bad Gateway``.
* :class:`Socks5Proxy`: RFC 1928, no authentication, CONNECT only, IPv4 or domain-name targets
  (``socks5://`` sends the address libcurl resolved, ``socks5h://`` sends the name). Refused
  targets get reply code 2 ("connection not allowed by ruleset").
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from dataclasses import dataclass

__all__ = ["HttpProxy", "ProxyHit", "Socks5Proxy"]


@dataclass(frozen=True)
class ProxyHit:
    """One relayed request: ``kind`` is GET/CONNECT (HTTP) or SOCKS5; ``allowed`` if relayed."""

    kind: str
    host: str
    port: int
    target: str  #: the request target (HTTP) or "host:port" (SOCKS / CONNECT)
    allowed: bool


class _Proxy:
    def __init__(self, names: dict[str, str]) -> None:
        self.names = {k.lower(): v for k, v in names.items()}
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.05)
        self.port: int = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._hits: list[ProxyHit] = []
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True)
        self._acceptor.start()

    def hits(self) -> list[ProxyHit]:
        with self._lock:
            return list(self._hits)

    def _log(self, hit: ProxyHit) -> None:
        with self._lock:
            self._hits.append(hit)

    def _target(self, host: str, port: int) -> tuple[str, int] | None:
        address = self.names.get(host.lower().strip("[]"))
        return None if address is None else (address, port)

    def close(self) -> None:
        self._stop.set()
        self._acceptor.join(5)
        self._sock.close()
        with self._lock:
            for sock in list(self._open):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in list(self._threads):
            thread.join(5)

    def __enter__(self) -> _Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with self._lock:
            self._open.add(conn)
        try:
            conn.settimeout(5)
            self._handle(conn)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(conn)
            conn.close()

    def _handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def _connect(self, address: tuple[str, int]) -> socket.socket:
        upstream = socket.create_connection(address, timeout=5)
        with self._lock:
            self._open.add(upstream)
        return upstream

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        """Relay bytes both ways until either side closes (or the proxy stops)."""
        try:
            a.settimeout(None)
            b.settimeout(None)
            while not self._stop.is_set():
                readable, _, _ = select.select([a, b], [], [], 0.1)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (b if sock is a else a).sendall(data)
        except OSError:
            return
        finally:
            with self._lock:
                self._open.discard(b)
            b.close()


def _read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("client closed before the end of the request head")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


class HttpProxy(_Proxy):
    """An HTTP/1.1 forward proxy (absolute-form GET and CONNECT)."""

    def _handle(self, conn: socket.socket) -> None:
        head, rest = _read_head(conn)
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            address = self._target(host, int(port))
            self._log(ProxyHit("CONNECT", host, int(port), target, address is not None))
            if address is None:
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            upstream = self._connect(address)
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            self._pipe(conn, upstream)
            return
        scheme, _, after = target.partition("://")
        authority, slash, path = after.partition("/")
        host, _, port_text = authority.rpartition(":") if ":" in authority else (authority, "", "")
        port = int(port_text or (443 if scheme == "https" else 80))
        address = self._target(host, port) if scheme == "http" else None
        self._log(ProxyHit(method, host, port, target, address is not None))
        if address is None:
            conn.sendall(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            return
        headers = [
            line
            for line in lines[1:]
            if line.split(":", 1)[0].strip().lower() not in ("proxy-connection", "connection")
        ]
        forwarded = "\r\n".join([f"{method} {slash}{path} HTTP/1.1", *headers, "Connection: close"])
        upstream = self._connect(address)
        upstream.sendall(forwarded.encode("latin-1") + b"\r\n\r\n" + rest)
        self._pipe(conn, upstream)


class Socks5Proxy(_Proxy):
    """A SOCKS5 server (no authentication, CONNECT)."""

    def _handle(self, conn: socket.socket) -> None:
        version, nmethods = _recv_exact(conn, 2)
        methods = _recv_exact(conn, nmethods)
        if version != 5 or 0 not in methods:
            conn.sendall(b"\x05\xff")
            return
        conn.sendall(b"\x05\x00")
        _ver, command, _rsv, atyp = _recv_exact(conn, 4)
        if atyp == 1:
            host = socket.inet_ntoa(_recv_exact(conn, 4))
        elif atyp == 3:
            host = _recv_exact(conn, _recv_exact(conn, 1)[0]).decode("ascii", "replace")
        elif atyp == 4:
            host = socket.inet_ntop(socket.AF_INET6, _recv_exact(conn, 16))
        else:
            conn.sendall(b"\x05\x08\x00\x01" + bytes(6))  # address type not supported
            return
        (port,) = struct.unpack("!H", _recv_exact(conn, 2))
        address = self._target(host, port) if command == 1 else None
        self._log(ProxyHit("SOCKS5", host, port, f"{host}:{port}", address is not None))
        if address is None:
            conn.sendall(b"\x05\x02\x00\x01" + bytes(6))  # not allowed by ruleset
            return
        upstream = self._connect(address)
        bound_host, bound_port = upstream.getsockname()[:2]
        conn.sendall(
            b"\x05\x00\x00\x01" + socket.inet_aton(bound_host) + struct.pack("!H", bound_port)
        )
        self._pipe(conn, upstream)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("short read")
        data += chunk
    return data
