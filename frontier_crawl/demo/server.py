"""Serve a generated :class:`~frontier_crawl.demo.site.Site` on loopback, and check a crawl.

One listening socket on ``127.0.0.1`` (port 0: the OS picks) serves every host of the site;
the host is taken from the ``Host`` header, its port part ignored. HTTP/1.1 with keep-alive,
``Content-Length`` on every response, one daemon thread per connection
(``ThreadingHTTPServer``). Only GET is served; the other standard methods get 405, and the
connection is closed after them (a request body is never read).

Every request that reaches a method handler is appended to the server's request log as a
:class:`RequestLogEntry`; the e2e tests assert on that log, not on what the crawler says it did:

- :func:`politeness_violations`: per host, a request that started too soon after the previous
  response to that host finished (or while it was still in flight);
- :func:`robots_first_violations`: a host whose pages were requested before its
  ``/robots.txt`` had been answered.

Both report human-readable strings; an empty list means the crawl was compliant.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import socketserver
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast

from frontier_crawl.demo.site import Site

__all__ = [
    "CLOCK_TOLERANCE_S",
    "DemoServer",
    "RequestLogEntry",
    "politeness_violations",
    "robots_first_violations",
]

#: Slack allowed by :func:`politeness_violations`. Both timestamps are taken by the server with
#: ``time.monotonic()``, but in different threads and a few statements away from the socket
#: calls they stand for, so a compliant client can appear up to a scheduler tick early.
CLOCK_TOLERANCE_S = 0.005

_ROBOTS = "/robots.txt"


@dataclass(frozen=True, slots=True)
class RequestLogEntry:
    """One request as the server saw it."""

    host: str  #: Host header, lower-cased, port removed ("" when absent)
    path: str  #: request target as sent: path and query
    status: int
    started: float  #: time.monotonic() when the request line had been read
    finished: float  #: time.monotonic() after the response was written and flushed
    bytes: int  #: body bytes sent (0 for HEAD)
    client_port: int  #: the client's source port: equal for requests on one connection
    #: time.monotonic() just before the first response byte was sent. No client can have
    #: received the response earlier, so politeness gaps are measured from here: a check
    #: that cannot blame a polite client for the server thread being descheduled.
    responding: float = 0.0
    method: str = "GET"


class _Handler(BaseHTTPRequestHandler):
    """Answers from the server's Site; records each request in the server's log."""

    protocol_version = "HTTP/1.1"
    server_version = "frontier-crawl-demo"
    disable_nagle_algorithm = True
    wbufsize = 1 << 16  # buffered: headers and body leave in one send() for small pages
    _started = 0.0
    _in_flight = False

    @property
    def _demo(self) -> _DemoHTTPServer:
        return cast(_DemoHTTPServer, self.server)

    def setup(self) -> None:
        """Register the connection so that ``stop()`` can close it."""
        super().setup()
        self._demo.track(self.connection)

    def finish(self) -> None:
        """Flush and close, then forget the connection."""
        try:
            super().finish()
        finally:
            self._demo.untrack(self.connection)

    def parse_request(self) -> bool:
        """Stamp the request start (the request line has just been read); count it in flight."""
        self._started = time.monotonic()
        ok = super().parse_request()
        if ok:
            self._in_flight = True
            self._demo.begin()
        return ok

    def handle_one_request(self) -> None:
        """Serve one request; whatever happens, it is no longer in flight afterwards."""
        try:
            super().handle_one_request()
        finally:
            if self._in_flight:
                self._in_flight = False
                self._demo.end()

    def do_GET(self) -> None:
        """Serve a page, a robots.txt or a 404 from the Site."""
        host = self._virtual_host()
        status, content_type, body = self._demo.site.render(host, self.path, self._demo.port)
        self._respond(host, status, content_type, body)

    def _not_allowed(self) -> None:
        self.close_connection = True  # the request body, if any, is never read
        body = b"<!DOCTYPE html>\n<html><body><h1>405 Method Not Allowed</h1></body></html>\n"
        self._respond(self._virtual_host(), 405, "text/html; charset=utf-8", body)

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed
    do_TRACE = do_CONNECT = _not_allowed

    def _virtual_host(self) -> str:
        value = (self.headers.get("Host") or "").strip().lower()
        if value.startswith("["):  # IPv6 literal: [::1]:8080
            return value[: value.find("]") + 1]
        return value.partition(":")[0].rstrip(".")

    def _respond(self, host: str, status: int, content_type: str, body: bytes) -> None:
        responding = time.monotonic()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if status == 405:
            self.send_header("Allow", "GET")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        sent = 0
        if self.command != "HEAD":
            self.wfile.write(body)
            sent = len(body)
        self.wfile.flush()
        self._demo.record(
            RequestLogEntry(
                host=host,
                path=self.path,
                status=status,
                started=self._started,
                finished=time.monotonic(),
                responding=responding,
                bytes=sent,
                client_port=self.client_address[1],
                method=self.command,
            )
        )

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: the request log is the record."""


class _DemoHTTPServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that knows its Site, its log and its open connections."""

    daemon_threads = True
    block_on_close = False  # keep-alive clients may hold threads; stop() closes their sockets
    request_queue_size = 128  # a crawler may open many connections at once

    def __init__(self, site: Site, port: int = 0) -> None:
        self.site = site
        self.entries: list[RequestLogEntry] = []
        self.lock = threading.Lock()
        self._settled = threading.Condition(self.lock)
        self._in_flight = 0  #: requests parsed whose handler has not returned yet
        self._connections: set[socket.socket] = set()
        super().__init__(("127.0.0.1", port), _Handler)
        self.port: int = self.server_address[1]

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup (``getfqdn``) of the address."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def record(self, entry: RequestLogEntry) -> None:
        """Append to the request log."""
        with self.lock:
            self.entries.append(entry)

    def begin(self) -> None:
        """A request has been parsed and is being answered."""
        with self.lock:
            self._in_flight += 1

    def end(self) -> None:
        """A request is answered (and recorded) or abandoned."""
        with self.lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._settled.notify_all()

    def snapshot(self, wait_s: float) -> list[RequestLogEntry]:
        """The log, after waiting up to ``wait_s`` for requests in flight to be recorded."""
        with self.lock:
            self._settled.wait_for(lambda: self._in_flight == 0, timeout=wait_s)
            return list(self.entries)

    def track(self, connection: socket.socket) -> None:
        """Remember an open client connection."""
        with self.lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        """Forget a closed client connection."""
        with self.lock:
            self._connections.discard(connection)

    def close_connections(self) -> None:
        """Shut down every open client connection (their threads then end by themselves)."""
        with self.lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the peer
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that hang up mid-response; report anything else."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class DemoServer:
    """Serves a Site on ``127.0.0.1:<port>``, virtual-hosted by the Host header.

    ``start()`` binds ``port`` (0, the default: the OS picks; tests always use 0) and runs the
    server in a daemon thread; ``stop()`` (idempotent) stops it and closes kept-alive
    connections. Also a context manager. A server runs once.
    """

    def __init__(self, site: Site, port: int = 0) -> None:
        self.site = site
        self._want_port = port
        self._server: _DemoHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None
        self._stopped = False
        self._lock = threading.Lock()

    def start(self) -> int:
        """Bind and serve in the background; returns the port. A no-op if already running."""
        with self._lock:
            if self._stopped:
                raise RuntimeError("DemoServer cannot be restarted; create a new one")
            if self._server is None:
                self._server = _DemoHTTPServer(self.site, self._want_port)
                self._port = self._server.port
                self._thread = threading.Thread(
                    target=self._server.serve_forever,
                    kwargs={"poll_interval": 0.05},
                    name=f"demo-server-{self._port}",
                    daemon=True,
                )
                self._thread.start()
            assert self._port is not None
            return self._port

    def stop(self) -> None:
        """Stop serving, close the listening socket and every open connection. Idempotent."""
        with self._lock:
            server, thread = self._server, self._thread
            self._thread = None
            self._stopped = server is not None
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()
        thread.join()

    def __enter__(self) -> DemoServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (still known after ``stop()``)."""
        if self._port is None:
            raise RuntimeError("DemoServer is not started")
        return self._port

    def base_url(self, host: str) -> str:
        """``http://{host}:{port}``, no trailing slash."""
        return f"http://{host}:{self.port}"

    def log(self, wait_s: float = 1.0) -> list[RequestLogEntry]:
        """A copy of the request log, in the order responses finished.

        A client can read a response before the server thread has recorded it, so this first
        waits (up to ``wait_s``) until no request is in flight: called right after a crawl
        ends, the log is complete.
        """
        server = self._server
        if server is None:
            return []
        return server.snapshot(wait_s)


def politeness_violations(
    log: Iterable[RequestLogEntry],
    min_gap_s: float,
    per_host_gap: Mapping[str, float] | None = None,
) -> list[str]:
    """Requests that came too soon after the previous one to the same host.

    Per host, entries are ordered by ``started``; a request violates when its ``started`` is
    earlier than ``previous.responding + gap - CLOCK_TOLERANCE_S``, where ``gap`` is
    ``per_host_gap[host]`` if given (it replaces ``min_gap_s``; pass the larger of the two if
    that is the rule) and ``min_gap_s`` otherwise. Overlapping requests (more than one in
    flight) always violate. robots.txt requests count like any other request.
    """
    by_host: dict[str, list[RequestLogEntry]] = defaultdict(list)
    for entry in log:
        by_host[entry.host].append(entry)
    problems: list[str] = []
    for host, entries in sorted(by_host.items()):
        gap = min_gap_s if per_host_gap is None else per_host_gap.get(host, min_gap_s)
        entries.sort(key=lambda e: e.started)
        for previous, current in itertools.pairwise(entries):
            waited = current.started - previous.responding
            if waited < gap - CLOCK_TOLERANCE_S:
                problems.append(
                    f"{host}: GET {current.path} started {waited:.3f}s after "
                    f"GET {previous.path} finished (required {gap:.3f}s)"
                )
    return problems


def robots_first_violations(log: Iterable[RequestLogEntry]) -> list[str]:
    """Hosts where a page was requested before the host's ``/robots.txt`` had been answered.

    Also reports hosts whose pages were requested with no ``/robots.txt`` request at all.
    """
    by_host: dict[str, list[RequestLogEntry]] = defaultdict(list)
    for entry in log:
        by_host[entry.host].append(entry)
    problems: list[str] = []
    for host, entries in sorted(by_host.items()):
        robots = [e for e in entries if e.path == _ROBOTS]
        pages = sorted((e for e in entries if e.path != _ROBOTS), key=lambda e: e.started)
        if not pages:
            continue
        if not robots:
            problems.append(f"{host}: {len(pages)} requests, /robots.txt never requested")
            continue
        answered = min(e.responding for e in robots)
        early = [e for e in pages if e.started < answered]
        if early:
            problems.append(
                f"{host}: {len(early)} requests before /robots.txt was answered, "
                f"first GET {early[0].path}"
            )
    return problems
