"""A small HTTP server on loopback whose answers a test scripts per (host, path, nth request).

It binds 127.0.0.1 unless given another loopback address (127.0.0.2 for a service the crawler
must never reach, on another address than the seeds'); it refuses any address outside
127.0.0.0/8, so no test can make it, or send the crawler, beyond the machine.

Its request log uses the demo server's ``RequestLogEntry`` (with ``responding``, the instant just
before the first response byte), so the same politeness checks apply. A request's ``started`` is
the kernel's receive time of its first byte (``SO_TIMESTAMPNS``), not the moment a server thread
got to read it: the crawler under test often runs in this process, and while it holds the GIL
(or a CPU-hungry neighbour holds the core) the server's threads read late, some later than
others, which made two request starts look closer than the crawler sent them (0.002 to 0.015 s
apart against a 0.05 s delay, on a loaded machine).
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import TCPServer
from typing import Any

from frontier_crawl.config import CrawlSettings, parse
from frontier_crawl.demo.server import RequestLogEntry


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/html"),)
    delay_s: float = 0.0  #: wait before answering (the crawler sees a slow server)


Script = Callable[[str, str, int], Answer]  # (host, path, nth request to that URL, from 1)


def page(*links: str) -> Answer:
    """An HTML page linking to ``links``."""
    body = "".join(f'<a href="{u}">{u}</a>\n' for u in links)
    return Answer(200, f"<html><body>{body}</body></html>".encode())


NOT_FOUND = Answer(404, b"not found")

#: Linux's SO_TIMESTAMPNS (asm-generic and x86; the socket module does not name it): each
#: received segment is stamped with CLOCK_REALTIME when it arrived, given by recvmsg
_SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")


def arrival(sock: socket.socket) -> float | None:
    """When the next unread byte on ``sock`` arrived (waiting for one), on the
    ``time.monotonic()`` clock; None at the end of the stream or without a kernel stamp."""
    try:
        data, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(_TIMESPEC.size), socket.MSG_PEEK)
    except OSError:
        return None
    wall, mono = time.time(), time.monotonic()
    for level, kind, blob in ancillary:
        if data and level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack(blob[: _TIMESPEC.size])
            if sec:  # 0: a segment that was not stamped
                return min(sec + nsec / 1e9 - wall + mono, mono)
    return None


class _Server(ThreadingHTTPServer):
    def server_bind(self) -> None:
        """HTTPServer's, without ``socket.getfqdn``: for an address that /etc/hosts does not
        name (127.0.0.2) that is a reverse DNS query, a packet off the machine."""
        TCPServer.server_bind(self)
        # stamped from the first segment on, even one queued before its connection is
        # accepted (the accepted sockets inherit the option)
        self.socket.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that stopped reading (robots.txt cut at 512 KiB) resets: not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedServer:
    """Threaded HTTP/1.1 server answering from a script; binds ``address`` (a loopback IPv4
    address, 127.0.0.1 by default) port 0."""

    def __init__(self, script: Script, *, address: str = "127.0.0.1") -> None:
        if not ipaddress.IPv4Address(address).is_loopback:
            raise ValueError(f"a scripted server binds loopback (127.0.0.0/8) only: {address!r}")
        self.address = address
        self._script = script
        self._lock = threading.Lock()
        self._log: list[RequestLogEntry] = []
        self._counts: Counter[tuple[str, str]] = Counter()
        self._httpd = _Server((address, 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def resolve(self, *hosts: str) -> list[str]:
        """curl-style resolve entries mapping ``hosts`` to this server."""
        return [f"{h}:{self.port}:{self.address}" for h in hosts]

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"

    def log(self) -> list[RequestLogEntry]:
        with self._lock:
            return list(self._log)

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            #: unbuffered: each request's bytes stay in the socket until it is read, so the
            #: kernel's stamp of its first byte is there to peek at (``arrival``)
            rbufsize = 0
            _arrived: float | None = None

            def handle_one_request(self) -> None:
                self._arrived = arrival(self.connection)
                super().handle_one_request()

            def do_GET(self) -> None:
                started = self._arrived if self._arrived is not None else time.monotonic()
                host = (self.headers.get("Host") or "").split(":")[0].lower()
                with server._lock:
                    server._counts[(host, self.path)] += 1
                    nth = server._counts[(host, self.path)]
                answer = server._script(host, self.path, nth)
                if answer.delay_s:
                    time.sleep(answer.delay_s)
                responding = time.monotonic()
                self.send_response(answer.status)
                for name, value in answer.headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                try:
                    self.wfile.write(answer.body)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
                    self.close_connection = True
                entry = RequestLogEntry(
                    host=host,
                    path=self.path,
                    status=answer.status,
                    started=started,
                    finished=time.monotonic(),
                    bytes=len(answer.body),
                    client_port=self.client_address[1],
                    responding=responding,
                )
                with server._lock:
                    server._log.append(entry)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def crawl_settings(
    tmp_path: Path, seeds: list[str], resolve: list[str], **sections: Any
) -> CrawlSettings:
    """Settings for a crawl of a scripted server: the defaults, but for these (each test may
    set more, and says why):

    * ``min_delay_s`` 1.0 -> 0.01 and ``retry_backoff_s`` 2.0 -> 0.05: the policies are checked
      from gaps between requests; at the defaults each test would take minutes;
    * ``delay_factor`` 2.0 -> 0: the fixed delay, so each gap is the policy under test alone;
    * ``robots_retry_s`` 30 -> 0.1: a robots.txt retry in seconds, not minutes;
    * ``connect_timeout_s`` 10 -> 2, ``timeout_s`` 30 -> 5: nothing here should hang, and a
      mistake fails the test fast.
    """
    raw: dict[str, dict[str, Any]] = {
        "crawl": {"seeds": seeds, "output_dir": str(tmp_path / "out")},
        "politeness": {"min_delay_s": 0.01, "delay_factor": 0.0, "robots_retry_s": 0.1},
        "fetch": {
            "resolve": resolve,
            "connect_timeout_s": 2.0,
            "timeout_s": 5.0,
            "retry_backoff_s": 0.05,
        },
        "output": {"progress_interval_s": 0.0},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return parse(raw)
