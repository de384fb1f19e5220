"""The control API's listener under abuse, without a crawl: a real ControlServer on 127.0.0.1
(port 0) whose commands are answered by a dispatch function, and raw sockets that send what a
careless or hostile client would (slow headers, floods, malformed framing, absolute-form
targets, preflights, tokens where they do not belong).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h11
import pytest

from frontier_crawl.control.commands import Command
from frontier_crawl.control.server import ADDR_FILE, TOKEN_FILE, ControlServer
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(90)

LOGGER = "frontier_crawl.control.server"


def _status() -> dict[str, Any]:
    return {"state": "running", "paused": False}


def _metrics() -> bytes:
    return b"frontier_crawl_pages_total 1\n"


def _dispatch(command: Command) -> dict[str, Any]:
    return {"result": "applied", "command": command.name, "host": command.host}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ControlServer]:
    control = ControlServer("127.0.0.1:0", tmp_path, _status, _metrics, dispatch=_dispatch)
    try:
        yield control
    finally:
        control.close()


def connect(server: ControlServer, timeout_s: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=timeout_s)


def head(server: ControlServer, method: str, target: str, *extra: str, token: bool = True,
         host: str | None = None) -> bytes:  # fmt: skip
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host or server.address}"]
    if token:
        lines.append(f"Authorization: Bearer {server.token}")
    return ("\r\n".join([*lines, *extra]) + "\r\n\r\n").encode()


def exchange(server: ControlServer, data: bytes, timeout_s: float = 10.0) -> bytes:
    """Send ``data``, close our side, read everything until the server closes."""
    with connect(server, timeout_s) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


Replies = list[tuple[int, dict[str, str], bytes]]


def responses(raw: bytes, methods: list[str] | None = None) -> Replies:
    """The HTTP responses in ``raw`` to requests of ``methods`` (GET for those not given; a
    reply to HEAD has no body), interim 1xx replies skipped; h11 as the client: anything
    malformed raises."""
    client = h11.Connection(h11.CLIENT)
    out: Replies = []
    client.receive_data(raw)
    client.receive_data(b"")
    while client.trailing_data[0]:  # more bytes: one more response, whole
        method = (methods or [])[len(out)] if len(out) < len(methods or []) else "GET"
        client.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
        client.send(h11.EndOfMessage())
        event = client.next_event()
        while isinstance(event, h11.InformationalResponse):
            event = client.next_event()
        assert isinstance(event, h11.Response), event
        body = b""
        while not isinstance(part := client.next_event(), h11.EndOfMessage):
            assert isinstance(part, h11.Data), part
            body += part.data
        headers = {k.decode().lower(): v.decode() for k, v in event.headers}
        out.append((event.status_code, headers, body))
        if client.our_state is h11.MUST_CLOSE or client.their_state is h11.MUST_CLOSE:
            assert isinstance(client.next_event(), h11.ConnectionClosed)
            return out
        client.start_next_cycle()
    return out


def status_of(server: ControlServer, data: bytes) -> int:
    (reply,) = responses(exchange(server, data))
    return reply[0]


# -- connections: a cap, a normal backlog, a deadline per request --------------------------------


def test_connections_are_capped(server: ControlServer) -> None:
    """150 clients that never finish their headers hold at most the cap of threads; the rest
    are answered 503 (or dropped), and the API still answers once they are gone."""
    before = threading.active_count()
    slow = []
    try:
        for _ in range(150):
            sock = connect(server)
            sock.sendall(b"GET /api/status HTTP/1.1\r\nHost: ")
            slow.append(sock)
        time.sleep(0.5)  # let the listener accept what it will (a thread each, before the fix)
        grown = threading.active_count() - before
        assert grown <= 40, f"{grown} threads for 150 slow clients"
        refused = 0
        for sock in slow:
            sock.settimeout(0.05)
            try:
                data = sock.recv(4096)
            except TimeoutError:
                continue
            except ConnectionResetError:
                data = b""
            assert data == b"" or data.startswith(b"HTTP/1.1 503 "), data[:100]
            refused += 1
        assert refused >= 100, refused
    finally:
        for sock in slow:
            sock.close()
    ok = head(server, "GET", "/api/status")
    wait_until("the API answering again", lambda: status_of(server, ok) == 200)
    wait_until("threads back to before", lambda: threading.active_count() <= before)


def test_listen_backlog_is_a_normal_size(server: ControlServer) -> None:
    """``ss`` shows a listening socket's backlog as its Send-Q (5 before the fix)."""
    out = subprocess.run(["ss", "-Hltn", f"sport = :{server.port}"], capture_output=True,
                         text=True, check=True, timeout=10).stdout.split()  # fmt: skip
    assert int(out[2]) >= 128, out


def test_a_slow_client_is_cut_after_the_read_timeout(server: ControlServer) -> None:
    """A header byte every 0.5 s (each recv well inside the socket timeout): the request as a
    whole must arrive within READ_TIMEOUT_S, else 408 and the connection is closed."""
    from frontier_crawl.control import server as module

    # READ_TIMEOUT_S 10 -> 2 for this server: the same cut, after four trickled lines, not 20
    assert module.READ_TIMEOUT_S == server.read_timeout_s > 2
    server.read_timeout_s = limit = 2.0
    with connect(server, limit + 10) as sock:
        sock.sendall(b"GET /api/status HTTP/1.1\r\n")
        started = time.monotonic()
        closed = b""
        while time.monotonic() - started < limit + 5:
            try:
                sock.sendall(b"X-Slow: 1\r\n")
            except OSError:
                break
            sock.settimeout(0.5)
            try:
                closed = sock.recv(4096)
                break
            except TimeoutError:
                continue
        took = time.monotonic() - started
    assert took < limit + 3, f"a trickling client was still connected after {took:.1f} s"
    assert closed == b"" or closed.startswith(b"HTTP/1.1 408 "), closed[:100]


# -- logging: 401s counted, never a token -------------------------------------------------------


def test_401s_are_logged_once_per_client_with_a_count(
    server: ControlServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    wrong = head(server, "GET", "/api/status", "Authorization: Bearer nope", token=False)
    for _ in range(30):
        assert status_of(server, head(server, "GET", "/api/status", token=False)) == 401
    for _ in range(20):
        assert status_of(server, wrong) == 401
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(lines) == 1, lines[:5]
    assert "127.0.0.1" in lines[0] and "no token" in lines[0]
    server.close()
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(lines) == 2, lines
    assert "49 more" in lines[1] and "no token 29" in lines[1] and "wrong token 20" in lines[1]


def test_no_token_in_any_log_line(server: ControlServer, caplog: pytest.LogCaptureFixture) -> None:
    """Debug level (``-v``): the access lines name the path, never the query, a header or a
    token (the right one, or a wrong one a client tried)."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    secret, tried = server.token, "tried-" + "x" * 30
    sent = [
        head(server, "GET", f"/?token={secret}", token=False),
        head(server, "GET", f"/api/status?token={secret}", token=False),
        head(server, "GET", f"/?token={tried}", token=False),
        head(server, "GET", "/api/status", f"Cookie: session={secret}"),
        head(server, "GET", f"/{secret}/x"),
        head(server, "GET", "/api/status", f"Authorization: Bearer {tried}", token=False),
        head(server, "GET", f"/api/nothing?{secret}"),
        f"GET /?token={secret} HTTP/1.1\r\nHost: nowhere\r\n\r\n".encode(),
        f"GET /?token={secret}\x00 HTTP/1.1\r\n\r\n".encode(),
        f"GET / HTTP/1.1\r\nHost: {server.address}\r\nAuthorization: Bearer {secret}\x01\r\n\r\n"
        .encode(),
    ]  # fmt: skip
    for data in sent:
        exchange(server, data)
    logged = [r.getMessage() + (r.exc_text or "") for r in caplog.records]
    assert logged, "the access lines are debug lines: some must have been logged"
    for line in logged:
        assert secret not in line and tried not in line, line
        assert "token=" not in line and "Bearer" not in line and "session=" not in line, line


# -- what the request says: authority, framing, method ---------------------------------------


def test_absolute_form_targets_are_checked_like_the_host_header(server: ControlServer) -> None:
    assert status_of(server, head(server, "GET", "http://evil.example/api/status")) == 421
    assert status_of(server, head(server, "GET", "http://127.0.0.1:1/api/status")) == 421
    assert status_of(server, head(server, "GET", f"http://{server.address}/api/status")) == 200
    assert status_of(server, head(server, "GET", "evil.example:80")) == 400
    assert status_of(server, head(server, "GET", "*")) == 400


@pytest.mark.parametrize("length", ["2_0", "+20", "20 20", "0x14", "-1", "\uff12\uff10"])
def test_content_length_is_digits_only(server: ControlServer, length: str) -> None:
    body = b'{"host":"a.test"}   '  # 20 bytes
    data = head(server, "POST", "/api/block", f"Content-Length: {length}").replace(
        b"\r\n\r\n", b"\r\n\r\n" + body)  # fmt: skip
    raw = exchange(server, head(server, "POST", "/api/block", "Content-Length: 20") + body)
    assert responses(raw)[0][0] == 200  # the same request, well framed
    assert status_of(server, data) == 400


def test_content_length_with_transfer_encoding_is_refused(server: ControlServer) -> None:
    body = b'{"host":"a.test"}   '
    data = head(server, "POST", "/api/block", "Content-Length: 20",
                "Transfer-Encoding: chunked") + b"14\r\n" + body + b"\r\n0\r\n\r\n"  # fmt: skip
    raw = exchange(server, data)
    assert [r[0] for r in responses(raw)] == [400]


def test_a_cors_preflight_is_405_without_cors_headers(server: ControlServer) -> None:
    data = head(server, "OPTIONS", "/api/pause", "Origin: http://evil.example",
                "Access-Control-Request-Method: POST",
                "Access-Control-Request-Headers: authorization", token=False)  # fmt: skip
    ((code, headers, _),) = responses(exchange(server, data))
    assert code == 405, code
    assert not [h for h in headers if h.startswith("access-control")], headers
    assert headers.get("allow") == "POST"


def test_host_names_in_commands_are_validated(server: ControlServer) -> None:
    for host in ["a\x00b.test", "<script>x</script>", "a..b", "-a.test", "a" * 64 + ".test"]:
        body = json.dumps({"host": host}).encode()
        data = head(server, "POST", "/api/block", f"Content-Length: {len(body)}") + body
        ((code, _, reply),) = responses(exchange(server, data))
        assert code == 400, (host, code, reply)
        assert json.loads(reply)["error"].startswith('"host"')


# -- the dashboard's CSP -------------------------------------------------------------------------


def test_the_dashboard_csp_allows_its_own_script_and_style_by_hash(server: ControlServer) -> None:
    ((code, headers, page),) = responses(exchange(server, head(server, "GET", "/")))
    assert code == 200
    csp = headers["content-security-policy"]
    assert "unsafe-inline" not in csp and "unsafe-inline" not in page.decode()
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
    for tag in ("script", "style"):
        (inline,) = re.findall(rf"<{tag}>(.*?)</{tag}>".encode(), page, re.S)
        digest = base64.b64encode(hashlib.sha256(inline).digest()).decode()
        assert directives[f"{tag}-src"] == f"'sha256-{digest}'", tag
    assert directives["default-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert b" style=" not in page  # an inline style attribute would need 'unsafe-hashes'


# -- the address file ---------------------------------------------------------------------------


def test_address_and_token_files_are_written_whole_and_never_through_a_link(
    tmp_path: Path,
) -> None:
    """Planted: symlinks at both names and at the temporary names the old writer used, and a
    directory at one of them. The targets stay untouched; the files hold the whole address and
    token, mode 0600."""
    outside = tmp_path / "outside"
    outside.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    for name in (ADDR_FILE, TOKEN_FILE, TOKEN_FILE + ".tmp"):
        (out / name).symlink_to(outside)
    (out / (ADDR_FILE + ".tmp")).mkdir()
    control = ControlServer("127.0.0.1:0", out, _status, _metrics, dispatch=_dispatch)
    try:
        assert outside.read_text() == "precious\n"
        for name, text in ((ADDR_FILE, control.address), (TOKEN_FILE, control.token)):
            path = out / name
            assert not path.is_symlink() and path.read_text() == text + "\n"
            assert os.stat(path).st_mode & 0o777 == 0o600
    finally:
        control.close()
    assert not (out / ADDR_FILE).exists() and not (out / TOKEN_FILE).exists()


def test_the_reply_to_a_command_that_closes_the_server_is_sent(tmp_path: Path) -> None:
    """A command whose effect closes the API (POST /api/stop: the loop drains, then closes the
    server) races its own reply: the close came first once in CI and the client got
    RemoteDisconnected instead of "applied". Here the dispatch closes the server and gives
    the close half a second to run before it returns the result; the reply still arrives
    (before the fix, close shut every client socket both ways at once)."""
    closer: list[threading.Thread] = []

    def dispatch(command: Command) -> dict[str, Any]:
        thread = threading.Thread(target=control.close)
        closer.append(thread)
        thread.start()
        addr = tmp_path / ADDR_FILE
        wait_until("the address file removed by close", lambda: not addr.exists(), 10)
        thread.join(0.5)  # the close's own pace: it ends at once unless it waits for us
        return {"result": "applied", "command": command.name}

    control = ControlServer("127.0.0.1:0", tmp_path, _status, _metrics, dispatch=dispatch)
    try:
        raw = exchange(control, head(control, "POST", "/api/stop", "Content-Length: 2") + b"{}")
        [(status, _headers, body)] = responses(raw, ["POST"])
        assert status == 200 and json.loads(body)["result"] == "applied"
        closer[0].join(10)
        assert not closer[0].is_alive()
    finally:
        control.close()
