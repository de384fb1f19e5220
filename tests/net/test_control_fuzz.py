"""The control API's request parsing, fuzzed: random and hostile request bytes (bad request
lines, framing that disagrees with itself, headers over the limits, tokens and authorities
where they do not belong, pipelines, bare line feeds, NULs) thrown at a real ControlServer on
127.0.0.1 (port 0). Every reply must be well-formed HTTP/1.1 (h11 as the client parses it) or a
clean close; the server stays up, and no thread or connection is left behind."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier_crawl.control.server import ControlServer
from tests.net.test_control_server import (
    _dispatch,
    _metrics,
    _status,
    connect,
    head,
    responses,
    status_of,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

EXAMPLES = 300
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlServer]:
    out: Path = tmp_path_factory.mktemp("fuzz")
    control = ControlServer("127.0.0.1:0", out, _status, _metrics, dispatch=_dispatch)
    try:
        yield control
    finally:
        control.close()


GOOD = "<good>"  # replaced by the server's own address or token when sent

METHODS = st.sampled_from(["GET", "POST", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH",
                           "CONNECT", "TRACE", "get", "G\x00T", "", "GET GET", "\x80"])
TARGETS = st.sampled_from([
    "/", "/api/status", "/metrics", "/api/pause", "/api/block", "/api/seeds", "/api/nothing",
    f"/?token={GOOD}", "/?token=nope", "*", "evil.example:80", "http://evil.example/api/status",
    f"http://{GOOD}/api/status", "https://127.0.0.1/api/status", "//evil/api/status",
    "/" + "a" * 20_000, "/%00", "/\x00", "/api/status#x", "/api/status?a=b&token=c", "",
    "/ /", "/\xff",
])  # fmt: skip
VERSIONS = st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/0.9", "HTTP/1.1 x",
                            "http/1.1", "", "HTTP/1.10"])  # fmt: skip
HEADER = st.sampled_from([
    ("Host", GOOD), ("Host", "evil.example"), ("Host", "127.0.0.1:1"), ("Host", ""),
    ("Host", "localhost:" + GOOD), ("Authorization", "Bearer " + GOOD), ("Authorization", "Bearer"),
    ("Authorization", "Basic eDp5"), ("Authorization", "bearer  nope"),
    ("Content-Length", "0"), ("Content-Length", "2"), ("Content-Length", "20"),
    ("Content-Length", "2_0"), ("Content-Length", "+1"), ("Content-Length", "-1"),
    ("Content-Length", "1,1"), ("Content-Length", "1, 2"), ("Content-Length", "9" * 25),
    ("Content-Length", str((1 << 20) + 1)), ("Content-Length", ""), ("Content-Length", "0x10"),
    ("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "gzip"),
    ("Transfer-Encoding", "chunked, chunked"), ("Transfer-Encoding", "identity"),
    ("Expect", "100-continue"), ("Connection", "close"), ("Connection", "keep-alive, Upgrade"),
    ("Upgrade", "h2c"), ("Origin", "http://evil.example"), ("Cookie", "t=" + GOOD),
    ("Content-Type", "application/json"), ("X-Nul", "a\x00b"), ("X-Long", "x" * 20_000),
    (" X-Space", "1"), ("X-Fold", "a\r\n b"), ("", "empty name"), ("X-Ctl", "\x01\x7f"),
    ("Héader", "ü"),
])  # fmt: skip
BODIES = st.sampled_from([
    b"", b"{}", b'{"host": "a.test"}', b'{"urls": ["http://a.test/"]}', b"[1]", b"not json",
    b"0\r\n\r\n", b"14\r\n" + b"x" * 20 + b"\r\n0\r\n\r\n", b'{"host": "a\\u0000b"}',
    b'{"value": 1e999}',
]) | st.binary(max_size=64)  # fmt: skip


@st.composite
def request_bytes(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """One hostile request, and its body when no header frames it (the server then reads that
    body as the start of the next request)."""
    method, target, version = draw(METHODS), draw(TARGETS), draw(VERSIONS)
    eol = draw(st.sampled_from(["\r\n", "\r\n", "\n", "\r"]))
    headers = draw(st.lists(HEADER, max_size=6))
    if draw(st.booleans()):
        headers.append(("Host", GOOD))
    if draw(st.booleans()):
        headers.append(("Authorization", "Bearer " + GOOD))
    line = " ".join(p for p in (method, target, version) if p or draw(st.booleans()))
    text = eol.join([line, *(f"{k}: {v}" for k, v in headers)]) + eol + eol
    body = draw(BODIES)
    framed = any(k in ("Content-Length", "Transfer-Encoding") for k, _ in headers)
    return text.encode("utf-8", "surrogateescape") + body, b"" if framed else body


def reply_methods(requests: list[tuple[bytes, bytes]]) -> list[str]:
    """The method of each request as the server reads the stream: a body no header frames is
    the start of the next request, and blank lines before a request line are skipped."""
    methods, spill = [], b""
    for sent, unframed in requests:
        start = (spill + sent).lstrip(b"\r\n")
        methods.append("HEAD" if start.startswith(b"HEAD ") else "GET")
        spill = unframed
    return methods


def test_an_unframed_body_is_the_next_request(server: ControlServer) -> None:
    """The case the fuzzing found: an OPTIONS with a body and no Content-Length, then a HEAD.
    The server answers the body (read as a request line) with a 400 that has a body: it is no
    reply to the HEAD."""
    options = b"OPTIONS / HTTP/1.1\r\nHost: " + GOOD.encode() + b"\r\n\r\nnot json"
    assert reply_methods([(options, b"not json"), (b"HEAD / HTTP/1.1\r\n\r\n", b"")]) == [
        "GET", "GET"]  # fmt: skip
    assert reply_methods([(options, b"\r\n"), (b"HEAD / HTTP/1.1\r\n\r\n", b"")]) == [
        "GET", "HEAD"]  # fmt: skip
    for body in (b"not json", b"\r\n"):
        sent = [(options.replace(b"not json", body), body), (b"HEAD / HTTP/1.1\r\n\r\n", b"")]
        replies = responses(send(server, [r for r, _ in sent], 0), reply_methods(sent))
        assert [code for code, _, _ in replies] == [405, 400], replies


def send(server: ControlServer, parts: list[bytes], split: int) -> bytes:
    data = b"".join(parts).replace(GOOD.encode() + b"/", server.address.encode() + b"/")
    data = data.replace(b"Bearer " + GOOD.encode(), b"Bearer " + server.token.encode())
    data = data.replace(b"token=" + GOOD.encode(), b"token=" + server.token.encode())
    data = data.replace(b"localhost:" + GOOD.encode(), f"localhost:{server.port}".encode())
    data = data.replace(GOOD.encode(), server.address.encode())
    with connect(server, 15.0) as sock:
        try:
            if 0 < split < len(data):  # in two writes: the parser sees a request cut anywhere
                sock.sendall(data[:split])
                sock.sendall(data[split:])
            else:
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server closed first (headers over the limit): read what it said
            pass
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@FUZZ
@given(requests=st.lists(request_bytes(), min_size=1, max_size=3), split=st.integers(0, 400))
def test_hostile_requests_get_well_formed_replies(
    server: ControlServer, requests: list[tuple[bytes, bytes]], split: int
) -> None:
    raw = send(server, [r for r, _ in requests], split)
    # a reply to a HEAD has no body (whether h11 could parse the rest of the request or not)
    replies = responses(raw, reply_methods(requests))  # h11 raises on anything malformed
    # a body sent without a Content-Length is read as the next request: one 400 more, closed
    assert len(replies) <= len(requests) + 1
    good = GOOD.encode()
    for (code, headers, _), (sent, _) in zip(replies, requests, strict=False):
        assert 200 <= code < 600, code
        assert not [h for h in headers if h.startswith("access-control")], headers
        if code == 200:  # only with the token and a Host naming the listener
            assert b"Bearer " + good in sent or b"token=" + good in sent, sent[:300]
            assert b"Host: " + good in sent or b"Host: localhost:" + good in sent, sent[:300]


@FUZZ
@given(data=st.binary(max_size=4096), split=st.integers(0, 4096))
def test_random_bytes_get_well_formed_replies(server: ControlServer, data: bytes,
                                              split: int) -> None:  # fmt: skip
    responses(send(server, [data], split))


def test_the_server_is_whole_after_the_fuzzing(server: ControlServer) -> None:
    """Run after the two above (file order): it still answers, and every connection and its
    thread are gone."""
    assert status_of(server, head(server, "GET", "/api/status")) == 200
    wait_until("no connection open", lambda: server.connections == 0)
    wait_until("no connection thread left", lambda: not [
        t for t in threading.enumerate() if t.name == "control-api-client"])  # fmt: skip
