"""Fetcher against real servers on 127.0.0.1 (port 0, threads, torn down by fixtures).

Well-behaved endpoints are served by ``http.server``; faults that an HTTP library would hide
(stalls, truncation, full accept queues) come from raw-socket handlers, one per test.
No test sends a packet anywhere but 127.0.0.1: the DNS failure uses a ``.onion`` name, which
libcurl refuses to resolve itself (RFC 7686), and host names in ``resolve`` entries never
reach a resolver.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gzip
import os
import socket
import ssl
import sys
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pycurl
import pytest
import trustme

from frontier_crawl.config.settings import FetchSection, PolitenessSection
from frontier_crawl.fetch import AddressPolicy, ErrorKind, Fetcher, FetchRequest, FetchResult
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(30)

PAGE = b"<html><body><a href='/next'>hello</a></body></html>\n" * 20
MB = 1 << 20


# -- servers ------------------------------------------------------------------------------


@functools.cache
def gzip_bomb() -> bytes:
    """100 MB of zeros, gzip-compressed (about 100 KB)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(MB)
    parts = [comp.compress(zeros) for _ in range(100)]
    parts.append(comp.flush())
    return b"".join(parts)


def raw_deflate(data: bytes) -> bytes:
    comp = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return comp.compress(data) + comp.flush()


class Handler(BaseHTTPRequestHandler):
    """Routes by path; HTTP/1.1 keep-alive."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        route = ROUTES.get(self.path.split("?", 1)[0])
        try:
            if route is None:
                self.reply(404, b"not found\n")
            else:
                route(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client aborted (too large): expected

    def reply(self, status: int, body: bytes, headers: Iterable[tuple[str, str]] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def reply_chunked(
        self,
        chunks: Iterable[bytes],
        headers: Iterable[tuple[str, str]] = (),
        trailer: bytes = b"",
    ) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.write(b"0\r\n" + trailer + b"\r\n")

    def echo_headers(self) -> None:
        self.reply(200, str(self.headers).encode("latin-1"), [("Content-Type", "text/plain")])


def _slices(data: bytes, size: int) -> Iterator[bytes]:
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


GZ = ("Content-Encoding", "gzip")
ROUTES: dict[str, Callable[[Handler], None]] = {
    "/": lambda h: h.reply(200, PAGE),
    "/500": lambda h: h.reply(500, b"oops\n"),
    "/echo": Handler.echo_headers,
    "/gzip": lambda h: h.reply(200, gzip.compress(PAGE), [GZ]),
    "/gzip-truncated": lambda h: h.reply(200, gzip.compress(PAGE)[:-12], [GZ]),
    "/gzip-corrupt": lambda h: h.reply(200, gzip.compress(PAGE)[:10] + b"not deflate!" * 9, [GZ]),
    "/deflate-zlib": lambda h: h.reply(200, zlib.compress(PAGE), [("Content-Encoding", "deflate")]),
    "/deflate-raw": lambda h: h.reply(200, raw_deflate(PAGE), [("Content-Encoding", "deflate")]),
    "/br": lambda h: h.reply(200, b"\x1b\x03not-really-brotli", [("Content-Encoding", "br")]),
    "/bomb": lambda h: h.reply_chunked(_slices(gzip_bomb(), 16384), [GZ]),
    "/big": lambda h: h.reply(200, bytes(2 * MB)),
    "/big-chunked": lambda h: h.reply_chunked(_slices(bytes(2 * MB), 65536)),
    "/trailer": lambda h: h.reply_chunked([PAGE], [("Trailer", "X-Sum")], b"X-Sum: 42\r\n"),
    "/moved": lambda h: h.reply(301, b"moved\n", [("Location", "/")]),
    "/r1": lambda h: h.reply(302, b"", [("Location", "/r2")]),
    "/r2": lambda h: h.reply(301, b"", [("Location", "/final")]),
    "/final": lambda h: h.reply(200, b"final\n", [("X-Final", "yes")]),
    "/to-file": lambda h: h.reply(302, b"", [("Location", "file:///etc/passwd")]),
}


class CountingServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that counts accepted connections."""

    daemon_threads = True
    request_queue_size = 128  # the default 5 drops SYNs of a burst of 32 connects
    accepted = 0

    def get_request(self) -> tuple[socket.socket, Any]:
        conn = super().get_request()
        self.accepted += 1
        return conn

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that abort (too large, closed handles) reset connections: not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture
def server() -> Iterator[CountingServer]:
    srv = CountingServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


@pytest.fixture
def base(server: CountingServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


ConnHandler = Callable[[socket.socket, threading.Event], None]


class RawServer:
    """Accepts connections on 127.0.0.1 and runs ``handler(conn, stop)`` for each, in threads."""

    def __init__(self, handler: ConnHandler) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self.stop = threading.Event()
        self.accepted = 0
        self._handler = handler
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop)
        self._acceptor.start()

    def _accept_loop(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            thread = threading.Thread(target=self._serve, args=(conn,))
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            self._handler(conn, self.stop)

    def close(self) -> None:
        self.stop.set()
        self._acceptor.join(5)
        self.sock.close()
        for thread in self._threads:
            thread.join(5)


@pytest.fixture
def raw_server() -> Iterator[Callable[[ConnHandler], RawServer]]:
    servers: list[RawServer] = []

    def start(handler: ConnHandler) -> RawServer:
        servers.append(RawServer(handler))
        return servers[-1]

    yield start
    for srv in servers:
        srv.close()


def read_request(conn: socket.socket) -> bytes:
    conn.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def hold_open(conn: socket.socket, stop: threading.Event) -> None:
    """Accept and say nothing (not even TLS)."""
    stop.wait(10)


def read_then_hold(conn: socket.socket, stop: threading.Event) -> None:
    """Read the request, never answer."""
    read_request(conn)
    stop.wait(10)


# -- fetcher helpers ----------------------------------------------------------------------


@pytest.fixture(params=[True, False], ids=["capture", "no-capture"])
def capture_requests(request: pytest.FixtureRequest) -> bool:
    """Every fetcher test runs with and without request capture (libcurl's verbose mode)."""
    return bool(request.param)


@pytest.fixture
def make_fetcher(capture_requests: bool) -> Iterator[Callable[..., Fetcher]]:
    fetchers: list[Fetcher] = []

    def make(**kwargs: Any) -> Fetcher:
        kwargs.setdefault("capture_requests", capture_requests)
        kwargs.setdefault("concurrency", 8)
        kwargs.setdefault("connect_timeout_s", 2.0)
        kwargs.setdefault("timeout_s", 5.0)
        fetchers.append(Fetcher(**kwargs))
        return fetchers[-1]

    yield make
    for fetcher in fetchers:
        fetcher.close()


def fetch_all(
    fetcher: Fetcher, requests: Iterable[FetchRequest], limit_s: float = 10.0
) -> list[FetchResult]:
    """Submit everything (as slots free up) and poll until every result is back."""
    pending = list(requests)
    results: list[FetchResult] = []
    deadline = time.monotonic() + limit_s
    while pending or fetcher.in_flight:
        while pending and fetcher.free_slots > 0:
            fetcher.submit(pending.pop(0))
        results.extend(fetcher.poll(0.5))
        assert time.monotonic() < deadline, "transfers did not finish in time"
    return results


def fetch(fetcher: Fetcher, url: str) -> FetchResult:
    (result,) = fetch_all(fetcher, [FetchRequest(url)])
    return result


# -- responses ----------------------------------------------------------------------------


def test_200_with_body(make_fetcher: Callable[..., Fetcher], base: str) -> None:
    fetcher = make_fetcher()
    request = FetchRequest(f"{base}/", token=("opaque", 1))
    fetcher.submit(request)
    started = time.monotonic()
    results = fetcher.poll(5.0)
    assert time.monotonic() - started < 2.0  # poll returns as soon as the transfer is done
    (result,) = results
    assert result.request is request
    assert result.url == request.url
    assert (result.status, result.error, result.error_detail) == (200, None, "")
    assert result.body == PAGE
    assert result.body is result.raw_body
    assert result.content_type == "text/html"
    assert result.ip == "127.0.0.1"
    assert result.http_version == "1.1"
    assert abs(result.started_at - time.time()) < 5
    assert 0 <= result.duration_s < 2
    assert fetcher.in_flight == 0


def test_404_and_500_are_responses_not_errors(
    make_fetcher: Callable[..., Fetcher], base: str
) -> None:
    fetcher = make_fetcher()
    results = fetch_all(fetcher, [FetchRequest(f"{base}/missing"), FetchRequest(f"{base}/500")])
    by_status = {r.status: r for r in results}
    assert set(by_status) == {404, 500}
    assert by_status[404].error is None
    assert by_status[404].body == b"not found\n"
    assert by_status[500].error is None


def test_headers_and_request_bytes(
    make_fetcher: Callable[..., Fetcher], base: str, capture_requests: bool
) -> None:
    fetcher = make_fetcher(user_agent="TestBot/1.0 (+http://example.invalid/bot)")
    result = fetch(fetcher, f"{base}/echo")
    # what the server saw (the echo body)
    assert b"User-Agent: TestBot/1.0 (+http://example.invalid/bot)" in result.body
    assert result.header_bytes.startswith(b"HTTP/1.1 200 OK\r\n")
    assert result.header_bytes.endswith(b"\r\n\r\n")
    assert b"Content-Length: " in result.header_bytes
    assert result.header("content-length") == str(len(result.body))
    assert result.header("Content-Type") == "text/plain"
    assert all(name == name.lower() for name, _ in result.headers)
    if not capture_requests:
        assert result.request_bytes == b""
        return
    assert result.request_bytes.startswith(b"GET /echo HTTP/1.1\r\n")
    assert b"User-Agent: TestBot/1.0 (+http://example.invalid/bot)\r\n" in result.request_bytes
    assert b"Accept-Encoding: gzip, deflate\r\n" in result.request_bytes
    assert result.request_bytes.endswith(b"\r\n\r\n")


def test_request_headers_are_sent(
    make_fetcher: Callable[..., Fetcher], base: str, capture_requests: bool
) -> None:
    fetcher = make_fetcher()
    request = FetchRequest(f"{base}/echo", headers=(("If-None-Match", '"abc"'),))
    (result,) = fetch_all(fetcher, [request])
    assert b'If-None-Match: "abc"' in result.body
    assert (b'If-None-Match: "abc"' in result.request_bytes) is capture_requests
    assert b'If-None-Match: "abc"' in result.body


def test_trailers_are_not_part_of_the_header_block(
    make_fetcher: Callable[..., Fetcher], base: str
) -> None:
    result = fetch(make_fetcher(), f"{base}/trailer")
    assert result.error is None
    assert result.body == PAGE
    assert b"X-Sum: 42" not in result.header_bytes
    assert result.header("x-sum") is None
    assert result.header_bytes.endswith(b"\r\n\r\n")


def test_from_settings(base: str) -> None:
    fetch_section = FetchSection(concurrency=3, timeout_s=5.0, max_body_bytes=MB)
    politeness = PolitenessSection(user_agent="SettingsBot/2.0")
    with Fetcher.from_settings(fetch_section, politeness) as fetcher:
        assert fetcher.free_slots == 3
        result = fetch(fetcher, f"{base}/")
    assert result.status == 200
    assert b"User-Agent: SettingsBot/2.0\r\n" in result.request_bytes


# -- content encoding ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/gzip", "/deflate-zlib", "/deflate-raw"])
def test_compressed_body_is_decoded_and_raw_kept(
    make_fetcher: Callable[..., Fetcher], base: str, path: str
) -> None:
    result = fetch(make_fetcher(), base + path)
    assert (result.status, result.error) == (200, None)
    assert result.body == PAGE
    assert result.raw_body != PAGE
    assert len(result.raw_body) == int(result.header("content-length") or -1)
    if path == "/gzip":
        assert gzip.decompress(result.raw_body) == PAGE


def test_unknown_encoding_is_passed_through(
    make_fetcher: Callable[..., Fetcher], base: str
) -> None:
    result = fetch(make_fetcher(), f"{base}/br")
    assert (result.status, result.error) == (200, None)
    assert result.body is result.raw_body
    assert result.header("content-encoding") == "br"


@pytest.mark.parametrize("path", ["/gzip-corrupt", "/gzip-truncated"])
def test_bad_compressed_stream_is_protocol_error(
    make_fetcher: Callable[..., Fetcher], base: str, path: str
) -> None:
    result = fetch(make_fetcher(), base + path)
    assert result.status == 200
    assert result.error is ErrorKind.PROTOCOL
    assert result.error_detail
    assert result.body == b""
    assert result.raw_body  # the wire bytes are kept for the archive


def test_gzip_bomb_is_too_large_without_inflating(
    make_fetcher: Callable[..., Fetcher], base: str
) -> None:
    gzip_bomb()  # compress outside the measured window
    fetcher = make_fetcher(max_body_bytes=MB)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = fetch(fetcher, f"{base}/bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.status == 200
    assert result.error is ErrorKind.TOO_LARGE
    assert result.header("content-encoding") == "gzip"
    assert result.body == b"" and result.raw_body == b""
    assert peak < 6 * MB, f"peak {peak} bytes: the 100 MB bomb was inflated"


@pytest.mark.parametrize("path", ["/big", "/big-chunked"])
def test_body_over_the_cap_is_too_large(
    make_fetcher: Callable[..., Fetcher], base: str, path: str
) -> None:
    # /big announces Content-Length (MAXFILESIZE fast path); /big-chunked does not (abort)
    result = fetch(make_fetcher(max_body_bytes=MB), base + path)
    assert result.error is ErrorKind.TOO_LARGE
    assert result.status == 200
    assert result.header_bytes.startswith(b"HTTP/1.1 200")
    assert result.body == b"" and result.raw_body == b""


def test_body_exactly_at_the_cap_is_fine(make_fetcher: Callable[..., Fetcher], base: str) -> None:
    result = fetch(make_fetcher(max_body_bytes=len(PAGE)), f"{base}/gzip")
    assert (result.error, result.body) == (None, PAGE)
    result = fetch(make_fetcher(max_body_bytes=len(PAGE) - 1), f"{base}/gzip")
    assert result.error is ErrorKind.TOO_LARGE


@pytest.mark.parametrize("path", ["/big", "/big-chunked", "/bomb"])
def test_keep_bytes_cuts_the_body_whatever_the_cap(
    make_fetcher: Callable[..., Fetcher], base: str, path: str
) -> None:
    """robots.txt (RFC 9309 2.5): the first keep_bytes of the decoded body, no error, even
    past max_body_bytes (an announced length, none, a gzip bomb)."""
    gzip_bomb()
    (result,) = fetch_all(
        make_fetcher(max_body_bytes=1000), [FetchRequest(base + path, keep_bytes=100_000)]
    )
    assert (result.status, result.error, result.cut) == (200, None, True)
    assert result.body == bytes(100_000)
    assert 0 < len(result.raw_body) <= 100_000
    if path != "/bomb":
        assert result.raw_body == result.body
    small = fetch(make_fetcher(), f"{base}/gzip")
    (whole,) = fetch_all(make_fetcher(), [FetchRequest(f"{base}/gzip", keep_bytes=len(PAGE))])
    assert (whole.error, whole.cut, whole.body) == (None, False, small.body)


# -- redirects and schemes ----------------------------------------------------------------


def test_redirect_is_not_followed_by_default(
    make_fetcher: Callable[..., Fetcher], base: str
) -> None:
    result = fetch(make_fetcher(), f"{base}/moved")
    assert (result.status, result.error) == (301, None)
    assert result.url == f"{base}/moved"
    assert result.header("location") == "/"
    assert result.body == b"moved\n"


def test_redirects_are_never_followed_by_libcurl(
    make_fetcher: Callable[..., Fetcher], base: str
) -> None:
    """A chain of redirects: only its first answer comes back (each hop is the caller's to
    request, through scope and the address policy); FetchRequest has no way to ask for more."""
    result = fetch(make_fetcher(), f"{base}/r1")
    assert (result.status, result.error, result.url) == (302, None, f"{base}/r1")
    assert result.header("location") == "/r2"
    assert "follow_redirects" not in {f.name for f in dataclasses.fields(FetchRequest)}


def test_a_reused_handle_carries_nothing_over(
    make_fetcher: Callable[..., Fetcher], base: str
) -> None:
    """One handle, reused without reset: the second request neither follows redirects nor
    sends the first one's header."""
    fetcher = make_fetcher(concurrency=1)
    first = FetchRequest(f"{base}/echo", headers=(("X-Only-Once", "1"),))
    (echo,) = fetch_all(fetcher, [first])
    assert b"X-Only-Once: 1" in echo.body
    moved = fetch(fetcher, f"{base}/r1")
    assert moved.status in (301, 302) and moved.url == f"{base}/r1"
    (again,) = fetch_all(fetcher, [FetchRequest(f"{base}/echo")])
    assert b"X-Only-Once" not in again.body


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://127.0.0.1:1/", "ftp://x/", "//x/"])
def test_forbidden_scheme_never_reaches_libcurl(
    make_fetcher: Callable[..., Fetcher], url: str
) -> None:
    fetcher = make_fetcher(concurrency=2)
    fetcher.submit(FetchRequest(url, token=7))
    assert (fetcher.in_flight, fetcher.free_slots) == (1, 1)
    started = time.monotonic()
    (result,) = fetcher.poll(5.0)
    assert time.monotonic() - started < 0.5  # ready at once, no waiting
    assert result.error is ErrorKind.FORBIDDEN_SCHEME
    assert (result.status, result.body, result.request_bytes, result.ip) == (0, b"", b"", "")
    assert result.request.token == 7
    assert fetcher.in_flight == 0


def test_redirect_to_file_is_not_followed(
    make_fetcher: Callable[..., Fetcher], base: str
) -> None:
    result = fetch(make_fetcher(), f"{base}/to-file")
    assert 300 <= result.status < 400 and result.error is None, result.error_detail
    assert result.header("location") == "file:///etc/passwd"
    assert b"root:" not in result.body
    assert b"root:" not in result.raw_body


# -- transport failures -------------------------------------------------------------------


def test_connection_refused_is_connect(make_fetcher: Callable[..., Fetcher]) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = fetch(make_fetcher(), f"http://127.0.0.1:{port}/")
    assert result.error is ErrorKind.CONNECT
    assert result.status == 0
    assert result.error_detail


def test_connect_timeout_is_connect(make_fetcher: Callable[..., Fetcher]) -> None:
    # a listener whose accept queue is full: further SYNs are dropped, connect() hangs
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        result = fetch(make_fetcher(connect_timeout_s=0.5), f"http://127.0.0.1:{port}/")
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
    assert result.error is ErrorKind.CONNECT, result.error_detail
    assert 0.4 < result.duration_s < 3


def test_unresolvable_name_is_dns(make_fetcher: Callable[..., Fetcher]) -> None:
    # Not nonexistent.invalid: glibc sends that query to the configured name server (seen
    # with strace). libcurl refuses .onion names itself (RFC 7686), without any lookup.
    result = fetch(make_fetcher(), "http://nonexistent.onion/")
    assert result.error is ErrorKind.DNS, result.error_detail
    assert result.status == 0
    assert result.duration_s < 1


def test_stall_after_headers_is_timeout(
    make_fetcher: Callable[..., Fetcher], raw_server: Callable[[ConnHandler], RawServer]
) -> None:
    def stall(conn: socket.socket, stop: threading.Event) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nthe start")
        stop.wait(10)

    srv = raw_server(stall)
    result = fetch(make_fetcher(timeout_s=1.0), srv.url)
    assert result.error is ErrorKind.TIMEOUT, result.error_detail
    assert result.status == 200  # the response that was received is reported
    assert 0.9 <= result.duration_s < 3
    assert result.raw_body == b"the start"


def test_stall_before_response_is_timeout(
    make_fetcher: Callable[..., Fetcher],
    raw_server: Callable[[ConnHandler], RawServer],
    capture_requests: bool,
) -> None:
    srv = raw_server(read_then_hold)
    result = fetch(make_fetcher(timeout_s=1.0), srv.url)
    assert result.error is ErrorKind.TIMEOUT, result.error_detail  # connected: not CONNECT
    assert result.status == 0
    assert result.request_bytes.startswith(b"GET / HTTP/1.1") is capture_requests


def test_close_mid_body_is_truncated(
    make_fetcher: Callable[..., Fetcher], raw_server: Callable[[ConnHandler], RawServer]
) -> None:
    def truncate(conn: socket.socket, stop: threading.Event) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 100)

    srv = raw_server(truncate)
    result = fetch(make_fetcher(), srv.url)
    assert result.error is ErrorKind.TRUNCATED, result.error_detail
    assert result.status == 200
    assert result.raw_body == b"x" * 100


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (b"", ErrorKind.TRUNCATED),  # empty reply (GOT_NOTHING)
        (b"<html>no status line</html>", ErrorKind.PROTOCOL),  # HTTP/0.9
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n", ErrorKind.PROTOCOL),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\nContent-Length: 2\r\n\r\nok", ErrorKind.PROTOCOL),
    ],
    ids=["empty", "http09", "bad-chunk", "bad-header"],
)
def test_malformed_replies(
    make_fetcher: Callable[..., Fetcher],
    raw_server: Callable[[ConnHandler], RawServer],
    reply: bytes,
    kind: ErrorKind,
) -> None:
    def respond(conn: socket.socket, stop: threading.Event) -> None:
        read_request(conn)
        conn.sendall(reply)

    srv = raw_server(respond)
    result = fetch(make_fetcher(), srv.url)
    assert result.error is kind, result.error_detail


# -- configuration ------------------------------------------------------------------------


def test_resolve_entries(make_fetcher: Callable[..., Fetcher], server: CountingServer) -> None:
    port = server.server_address[1]
    fetcher = make_fetcher(resolve=(f"alpha.test:{port}:127.0.0.1",))
    result = fetch(fetcher, f"http://alpha.test:{port}/echo")
    assert (result.status, result.error) == (200, None)
    assert f"Host: alpha.test:{port}".encode() in result.body
    assert result.ip == "127.0.0.1"



class _CountingCurl(pycurl.Curl):  # type: ignore[misc]
    """A handle that records the length of every RESOLVE list set on it."""

    resolve_lists: ClassVar[list[int]] = []

    def setopt(self, option: int, value: Any) -> None:
        if option == pycurl.RESOLVE:
            self.resolve_lists.append(len(value))
        super().setopt(option, value)


def test_many_resolve_entries_cost_nothing_per_transfer(
    make_fetcher: Callable[..., Fetcher], server: CountingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: with 10^5 entries the first request went out late (each new handle got the
    whole list: quadratic in pycurl and in libcurl's DNS cache). Each transfer now carries
    only its own host's entry."""
    port = server.server_address[1]
    n = 100_000
    lists: list[int] = []
    monkeypatch.setattr(_CountingCurl, "resolve_lists", lists)
    monkeypatch.setattr(pycurl, "Curl", _CountingCurl)
    started = time.monotonic()
    fetcher = make_fetcher(resolve=tuple(f"h{i}.test:{port}:127.0.0.1" for i in range(n)))
    hosts = [0, 1, n // 2, n - 1, 7, 99_998, 12_345, 54_321, 3]  # more than concurrency: reuse
    results = fetch_all(fetcher, [FetchRequest(f"http://h{i}.test:{port}/echo") for i in hosts])
    elapsed = time.monotonic() - started
    assert sorted(lists) == [1] * len(hosts), "each transfer carries its own entry, no other"
    assert {(r.status, r.error, r.ip) for r in results} == {(200, None, "127.0.0.1")}
    hosts_echoed = sorted(r.body.split(b"Host: ")[1].split()[0] for r in results)
    assert hosts_echoed == sorted(f"h{i}.test:{port}".encode() for i in hosts)
    assert elapsed < 5.0  # building the map is linear (the whole list per handle: quadratic)


# -- TLS ----------------------------------------------------------------------------------


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """An HTTPS server with a certificate for alpha.test from a throwaway CA: (port, CA file)."""
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("alpha.test").configure_cert(context)
    srv = CountingServer(("127.0.0.1", 0), Handler)
    srv.socket = context.wrap_socket(srv.socket, server_side=True)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield srv.server_address[1], str(ca_file)
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def test_https_with_ca_bundle(
    make_fetcher: Callable[..., Fetcher], tls_server: tuple[int, str]
) -> None:
    port, ca_file = tls_server
    fetcher = make_fetcher(resolve=(f"alpha.test:{port}:127.0.0.1",), ca_bundle=ca_file)
    result = fetch(fetcher, f"https://alpha.test:{port}/gzip")
    assert (result.status, result.error, result.body) == (200, None, PAGE)
    assert result.http_version == "1.1"  # http.server offers no h2 via ALPN
    assert result.ip == "127.0.0.1"


def test_https_untrusted_or_wrong_name_is_tls(
    make_fetcher: Callable[..., Fetcher], tls_server: tuple[int, str]
) -> None:
    port, ca_file = tls_server
    resolve = (f"alpha.test:{port}:127.0.0.1",)
    untrusted = fetch(make_fetcher(resolve=resolve), f"https://alpha.test:{port}/")
    assert untrusted.error is ErrorKind.TLS, untrusted.error_detail
    wrong_name = fetch(make_fetcher(ca_bundle=ca_file), f"https://127.0.0.1:{port}/")
    assert wrong_name.error is ErrorKind.TLS, wrong_name.error_detail
    unverified = fetch(make_fetcher(verify_tls=False), f"https://127.0.0.1:{port}/")
    assert (unverified.status, unverified.error) == (200, None)


def test_tls_handshake_stall_is_connect(
    make_fetcher: Callable[..., Fetcher], raw_server: Callable[[ConnHandler], RawServer]
) -> None:
    srv = raw_server(hold_open)
    result = fetch(make_fetcher(connect_timeout_s=0.5), f"https://127.0.0.1:{srv.port}/")
    assert result.error is ErrorKind.CONNECT, result.error_detail
    assert result.request_bytes == b""


# -- concurrency, slots, the loop ---------------------------------------------------------


def test_many_transfers_reuse_connections(
    make_fetcher: Callable[..., Fetcher], base: str, server: CountingServer
) -> None:
    fetcher = make_fetcher(concurrency=32)
    requests = [FetchRequest(f"{base}/?n={i}", token=i) for i in range(100)]
    results = fetch_all(fetcher, requests, limit_s=20)
    assert sorted(r.request.token for r in results) == list(range(100))  # type: ignore[type-var]
    assert all(r.status == 200 and r.error is None and r.body == PAGE for r in results)
    assert server.accepted < 100
    assert fetcher.free_slots == 32


def test_slots(make_fetcher: Callable[..., Fetcher], base: str) -> None:
    fetcher = make_fetcher(concurrency=2)
    assert (fetcher.free_slots, fetcher.in_flight) == (2, 0)
    fetcher.submit(FetchRequest(f"{base}/"))
    fetcher.submit(FetchRequest("file:///etc/passwd"))
    assert (fetcher.free_slots, fetcher.in_flight) == (0, 2)
    with pytest.raises(RuntimeError):
        fetcher.submit(FetchRequest(f"{base}/"))
    results = fetch_all(fetcher, [])
    assert sorted(str(r.error) for r in results) == ["None", "forbidden-scheme"]
    assert (fetcher.free_slots, fetcher.in_flight) == (2, 0)


def test_poll_with_nothing_in_flight_waits_for_the_timeout(
    make_fetcher: Callable[..., Fetcher],
) -> None:
    fetcher = make_fetcher()
    started = time.monotonic()
    assert fetcher.poll(0.3) == []
    assert 0.25 <= time.monotonic() - started < 1.0
    started = time.monotonic()
    assert fetcher.poll(0) == []
    assert time.monotonic() - started < 0.1


def test_poll_returns_empty_when_nothing_finished(
    make_fetcher: Callable[..., Fetcher], raw_server: Callable[[ConnHandler], RawServer]
) -> None:
    srv = raw_server(read_then_hold)
    fetcher = make_fetcher()
    fetcher.submit(FetchRequest(srv.url))
    started = time.monotonic()
    assert fetcher.poll(0.3) == []
    assert 0.25 <= time.monotonic() - started < 1.0
    assert fetcher.in_flight == 1


def test_close_with_transfers_in_flight(
    raw_server: Callable[[ConnHandler], RawServer],
) -> None:
    srv = raw_server(read_then_hold)
    fetcher = Fetcher(concurrency=4, timeout_s=5.0)
    fetcher.submit(FetchRequest(srv.url))
    fetcher.submit(FetchRequest(srv.url))
    assert fetcher.poll(0.2) == []
    fetcher.close()
    fetcher.close()  # idempotent
    with pytest.raises(RuntimeError):
        fetcher.submit(FetchRequest(srv.url))
    with pytest.raises(RuntimeError):
        fetcher.poll(0)


def test_bad_request_header_is_rejected_before_libcurl(
    make_fetcher: Callable[..., Fetcher], base: str
) -> None:
    fetcher = make_fetcher()
    fetcher.submit(FetchRequest(f"{base}/", headers=(("X-Evil", "a\r\nHost: other"),)))
    (result,) = fetcher.poll(1.0)
    assert result.error is ErrorKind.OTHER
    assert fetcher.in_flight == 0


# -- the address policy -------------------------------------------------------------------


def test_a_refused_address_is_never_connected_to(
    make_fetcher: Callable[..., Fetcher], base: str, server: CountingServer
) -> None:
    """Loopback not allowed: no connection is made (the server accepts none), the result is
    ADDRESS_REFUSED with the address and its category, and it is no transient error."""
    fetcher = make_fetcher(addresses=AddressPolicy())
    result = fetch(fetcher, f"{base}/")
    assert result.error is ErrorKind.ADDRESS_REFUSED, result.error_detail
    assert "127.0.0.1 (loopback)" in result.error_detail
    assert not result.error.transient
    assert (result.status, result.request_bytes, server.accepted) == (0, b"", 0)


def test_a_name_resolving_to_a_refused_address_is_refused(
    make_fetcher: Callable[..., Fetcher], server: CountingServer
) -> None:
    """The check is on the address connected to, after resolution: a name whose entry says
    127.0.0.1 is refused like the address itself; ::ffff:127.0.0.1 likewise."""
    port = server.server_address[1]
    resolve = (f"inner.test:{port}:127.0.0.1", f"mapped.test:{port}:[::ffff:127.0.0.1]")
    fetcher = make_fetcher(resolve=resolve, addresses=AddressPolicy(["private"]))
    for host in ("inner.test", "mapped.test"):
        result = fetch(fetcher, f"http://{host}:{port}/")
        assert result.error is ErrorKind.ADDRESS_REFUSED, (host, result.error_detail)
    assert server.accepted == 0


@pytest.mark.parametrize(
    "policy",
    [
        AddressPolicy(["loopback"]),
        AddressPolicy(["127.0.0.0/24"]),
        AddressPolicy(seed_hosts=["seed.test"]),  # a seed's own host: any address
        AddressPolicy(seed_addresses=["127.9.9.9"]),  # a seed's category: every host
    ],
    ids=["category", "cidr", "seed-host", "seed-category"],
)
def test_an_allowed_address_is_fetched(
    make_fetcher: Callable[..., Fetcher], server: CountingServer, policy: AddressPolicy
) -> None:
    port = server.server_address[1]
    fetcher = make_fetcher(resolve=(f"seed.test:{port}:127.0.0.1",), addresses=policy)
    result = fetch(fetcher, f"http://seed.test:{port}/")
    assert (result.status, result.error) == (200, None), result.error_detail
    assert server.accepted == 1


class _ReprCountingSocket(socket.socket):
    """A socket that counts the calls to its ``repr()`` (a ``getsockname`` and a
    ``getpeername`` each)."""

    reprs: ClassVar[list[int]] = []

    def __repr__(self) -> str:
        self.reprs.append(self.fileno())
        return super().__repr__()


def _open_sockets() -> int:
    """Sockets this process has open."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own descriptor
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return n


def test_an_allowed_connection_goes_to_libcurl_as_a_descriptor(
    make_fetcher: Callable[..., Fetcher], server: CountingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: given a socket object, pycurl calls its repr() (getsockname, getpeername and
    a format) and dup()s it, per new connection. open_socket hands libcurl the descriptor,
    which libcurl closes itself: none is left open."""
    reprs: list[int] = []
    monkeypatch.setattr(_ReprCountingSocket, "reprs", reprs)
    monkeypatch.setattr(socket, "socket", _ReprCountingSocket)
    port = server.server_address[1]
    before = _open_sockets()
    hosts = [f"h{i}.test" for i in range(12)]  # a connection each
    fetcher = make_fetcher(
        resolve=tuple(f"{h}:{port}:127.0.0.1" for h in hosts), addresses=AddressPolicy(["loopback"])
    )
    results = fetch_all(fetcher, [FetchRequest(f"http://{h}:{port}/") for h in hosts])
    assert {(r.status, r.error) for r in results} == {(200, None)}
    assert server.accepted == len(hosts)
    assert reprs == []
    fetcher.close()
    wait_until("the connections' sockets closed", lambda: _open_sockets() <= before, 10.0,
               detail=lambda: f"{_open_sockets()} open, {before} before")  # fmt: skip
