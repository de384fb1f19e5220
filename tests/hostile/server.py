"""A raw-socket HTTP/1.1 server: each request is handed to a handler with the socket itself.

Like urllib3's socket-level tests, handlers write whatever bytes they like (or nothing), stall,
reset or cut the connection; an HTTP library would hide those faults. The server binds port 0
on 127.0.0.1 (or ``::1``), runs one thread per connection (keep-alive honoured when the handler
says so), optionally speaks TLS, logs every request it parsed, and stops every thread on close.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tests.waiting import wait_until

__all__ = ["Blackhole", "Exchange", "Handler", "Hit", "RawHttpServer", "Request"]

_MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class Request:
    """One parsed request head."""

    method: str
    target: str
    version: str
    headers: tuple[tuple[str, str], ...]  #: (lower-cased name, value)

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in reversed(self.headers):
            if key == name:
                return value
        return None

    @property
    def host(self) -> str:
        """Host header without the port (lower-case)."""
        value = (self.header("host") or "").lower()
        if value.startswith("["):
            return value.split("]", 1)[0] + "]"
        return value.rsplit(":", 1)[0] if ":" in value else value

    @property
    def path(self) -> str:
        return self.target


@dataclass
class Hit:
    """One request as the server saw it (times are ``time.monotonic()``)."""

    request: Request
    peer: str
    connection: int  #: serial number of the connection it came on
    started: float
    finished: float | None = None
    status: int = 0  #: what the handler said it answered (0: nothing / not a status)

    @property
    def host(self) -> str:
        return self.request.host

    @property
    def path(self) -> str:
        return self.request.path


@dataclass
class Exchange:
    """What a handler gets: the request, the raw socket and the server's stop event."""

    request: Request
    sock: socket.socket
    stop: threading.Event
    hit: Hit
    keep_alive: bool = field(default=True)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(
        self,
        status: int,
        body: bytes = b"",
        headers: Iterable[tuple[str, str]] = (),
        content_type: str | None = "text/html; charset=utf-8",
    ) -> None:
        """A complete response with Content-Length (keep-alive unless the handler says not)."""
        self.hit.status = status
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Whatever')}"]
        if content_type is not None:
            lines.append(f"Content-Type: {content_type}")
        lines += [f"{name}: {value}" for name, value in headers]
        lines.append(f"Content-Length: {len(body)}")
        if not self.keep_alive:
            lines.append("Connection: close")
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def head(self, status: int, headers: Iterable[tuple[str, str]]) -> None:
        """Only a status line and headers (the handler writes the body its own way)."""
        self.hit.status = status
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Whatever')}"]
        lines += [f"{name}: {value}" for name, value in headers]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def wait(self, seconds: float) -> bool:
        """Sleep unless the server stops; True if it is stopping."""
        return self.stop.wait(seconds)

    def wait_closed(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the client to close the connection; True if it did.

        Also True when the server stops. Any bytes the client sends meanwhile are discarded.
        """
        deadline = time.monotonic() + seconds
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            readable, _, _ = select.select([self.sock], [], [], min(left, 0.05))
            if readable:
                try:
                    if not self.sock.recv(4096):
                        return True
                except OSError:
                    return True
        return True

    def reset(self) -> None:
        """Close with a TCP RST (SO_LINGER 0) instead of a FIN."""
        self.keep_alive = False
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


Handler = Callable[[Exchange], None]

_REASONS = {
    200: "OK",
    204: "No Content",
    301: "Moved Permanently",
    302: "Found",
    304: "Not Modified",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class RawHttpServer:
    """Threaded raw-socket server; ``handler(exchange)`` answers each request."""

    def __init__(
        self,
        handler: Handler,
        *,
        host: str = "127.0.0.1",
        tls: ssl.SSLContext | None = None,
        idle_timeout_s: float = 10.0,
    ) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, 0), family=family, backlog=128)
        self._sock.settimeout(0.05)
        self.host = host
        self.port: int = self._sock.getsockname()[1]
        self.stop = threading.Event()
        self.tls_failures = 0
        self.connections = 0
        self._handler = handler
        self._tls = tls
        self._idle_timeout_s = idle_timeout_s
        self._lock = threading.Lock()
        self._hits: list[Hit] = []
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()
        self._acceptor = threading.Thread(target=self._accept_loop, name="raw-accept", daemon=True)
        self._acceptor.start()

    # -- introspection ------------------------------------------------------------------

    def hits(self) -> list[Hit]:
        with self._lock:
            return list(self._hits)

    def resolve(self, *hosts: str) -> list[str]:
        """curl-style ``fetch.resolve`` entries mapping ``hosts`` to this server."""
        return [f"{h}:{self.port}:{self.host}" for h in hosts]

    def url(self, host: str, path: str = "/", scheme: str = "") -> str:
        scheme = scheme or ("https" if self._tls else "http")
        return f"{scheme}://{host}:{self.port}{path}"

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        self.stop.set()
        self._acceptor.join(5)
        self._sock.close()
        with self._lock:
            for sock in list(self._open):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in list(self._threads):
            thread.join(5)

    def __enter__(self) -> RawHttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- serving ------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self.stop.is_set():
            try:
                conn, peer = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                serial = self.connections
                self._open.add(conn)
            thread = threading.Thread(
                target=self._serve, args=(conn, peer[0], serial), name=f"raw-{serial}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket, peer: str, serial: int) -> None:
        sock = conn
        try:
            if self._tls is not None:
                conn.settimeout(5)
                try:
                    sock = self._tls.wrap_socket(conn, server_side=True)
                except (OSError, ssl.SSLError):
                    with self._lock:
                        self.tls_failures += 1
                    return
            self._requests(sock, peer, serial)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sock.close()
            with self._lock:
                self._open.discard(conn)

    def _requests(self, sock: socket.socket, peer: str, serial: int) -> None:
        buffer = b""
        while not self.stop.is_set():
            head, buffer = self._read_head(sock, buffer)
            if head is None:
                return
            request = _parse(head)
            if request is None:
                sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                return
            hit = Hit(request, peer, serial, time.monotonic())
            with self._lock:
                self._hits.append(hit)
            exchange = Exchange(request, sock, self.stop, hit)
            if (request.header("connection") or "").lower() == "close":
                exchange.keep_alive = False
            try:
                self._handler(exchange)
            finally:
                hit.finished = time.monotonic()
            if not exchange.keep_alive:
                return

    def _read_head(self, sock: socket.socket, buffer: bytes) -> tuple[bytes | None, bytes]:
        sock.settimeout(0.2)
        idle_until = time.monotonic() + self._idle_timeout_s
        while b"\r\n\r\n" not in buffer:
            if self.stop.is_set() or time.monotonic() > idle_until or len(buffer) > _MAX_HEAD:
                return None, b""
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                return None, b""
            buffer += chunk
        head, _, rest = buffer.partition(b"\r\n\r\n")
        sock.settimeout(None)
        return head, rest


def _parse(head: bytes) -> Request | None:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return None
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.append((name.strip().lower(), value.strip()))
    return Request(parts[0], parts[1], parts[2], tuple(headers))


class Blackhole:
    """A listener whose accept queue is full: further SYNs are dropped, so connect() hangs.

    (Linux drops a SYN to a listener with a full accept queue; the client retransmits until
    its own connect timeout.) Nothing is ever accepted.
    """

    def __init__(self, fillers: int = 4) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=0)
        self.port: int = self._listener.getsockname()[1]
        self._fillers: list[socket.socket] = []
        for _ in range(fillers):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", self.port))
            self._fillers.append(filler)
        try:  # the fillers' handshakes fill the accept queue
            wait_until("the blackhole's accept queue full", self._queue_full, 5.0, every_s=0.005)
        except AssertionError:
            self.close()
            raise

    def _queue_full(self) -> bool:
        """Whether the listener's accept queue is full: more handshaken connections waiting than
        its backlog of 0 (Linux's /proc/net/tcp shows a listener's queue as its rx_queue)."""
        with open("/proc/self/net/tcp") as table:
            for line in table.readlines()[1:]:
                fields = line.split()
                port = int(fields[1].rpartition(":")[2], 16)
                if fields[3] == "0A" and port == self.port:  # 0A: LISTEN
                    return int(fields[4].partition(":")[2], 16) > 0
        return False

    def close(self) -> None:
        for filler in self._fillers:
            filler.close()
        self._listener.close()
