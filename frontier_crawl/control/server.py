"""The control API: an HTTP/1.1 listener (JSON in and out) in daemon threads.

``[control] listen = "127.0.0.1:8740"`` turns it on (it is off by default). Port 0 takes any
free port; the address bound is written to ``output_dir/control.addr`` and a fresh token to
``output_dir/control.token`` (mode 0600, regenerated at every start; each written whole to a
fresh temporary file and renamed into place, so a reader sees no file or all of it, and a
planted symlink is replaced, never followed), which ``frontier-crawl ctl`` reads. Both files
are removed when the crawl ends.

Requests are parsed by h11 (a sans-IO HTTP/1.1 implementation), not by hand: a malformed
request line or header, a Content-Length that is not digits, conflicting lengths, a transfer
coding other than chunked, or headers over :data:`MAX_HEAD_BYTES` are 400 (or 431, 501) and the
connection is closed.

Rules, every request:

* At most :data:`MAX_CONNECTIONS` connections are served at once (a thread each); one more is
  answered 503 at once by the listener thread and closed. The whole of a request (its head and
  its body) must arrive within :data:`READ_TIMEOUT_S` of the connection's opening or the end
  of the previous reply, else 408 and the connection is closed: a client that trickles a byte
  at a time holds its slot that long at most. Listen backlog: :data:`BACKLOG`.
* The request's authority must name this listener: the Host header and, for an absolute-form
  target (``GET http://host:port/path``), the target's authority too, each the listen host,
  ``localhost`` or an IP literal, with the bound port. Anything else (a DNS-rebinding page,
  whose Host is the attacker's name) is 421, before the token is looked at. Other target forms
  (``*``, ``host:port``) are 400.
* OPTIONS (a CORS preflight) is 405 with ``Allow``, before the token is looked at; no reply
  carries CORS headers (a browser page from elsewhere cannot read a reply, nor send the token
  header, which needs a preflight). GET never changes anything.
* ``Authorization: Bearer <token>`` (compared with ``hmac.compare_digest``); missing or wrong:
  401, and the connection is closed. ``GET /`` alone may bring the token as ``?token=`` (the
  dashboard's link; its script moves it into the header). A client's first 401 is a warning
  naming its address; the next ones are counted and logged as one line per client per
  :data:`REFUSALS_LOG_INTERVAL_S`.
* Logs never show a token: access lines (debug) name the method, the path without its query
  (a token in the path is masked) and the status; never a header or a request line.
* Bodies: JSON objects, at most :data:`MAX_BODY_BYTES` (413 on the announced length, before
  a byte is read), framed by Content-Length (411 for a chunked body, 400 for Content-Length
  with Transfer-Encoding). Errors: 400 ``{"error": ...}`` for a bad body, 404 for an unknown
  path, 405 (with ``Allow``) for a known path and the wrong method.

Endpoints: ``GET /`` (dashboard), ``GET /metrics``, ``GET /api/status``, and POST
``/api/pause``, ``/api/resume``, ``/api/stop``, ``/api/seeds`` ``{"urls": [...]}``,
``/api/block`` / ``/api/unblock`` ``{"host": h}``, ``/api/host-delay`` ``{"host": h,
"delay_s": f}`` (``null``: back to the config), ``/api/concurrency`` ``{"value": n}``,
``/api/reload``. A POST is answered once the crawl's loop has applied it (see commands.py).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import selectors
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h11

from frontier_crawl.config import ConfigError
from frontier_crawl.control.commands import (
    COMMANDS,
    BadCommand,
    Command,
    CommandQueue,
    parse_command,
)
from frontier_crawl.control.dashboard import content_security_policy, dashboard_html

__all__ = ["ADDR_FILE", "TOKEN_FILE", "ControlServer", "parse_listen"]

log = logging.getLogger(__name__)

ADDR_FILE = "control.addr"
TOKEN_FILE = "control.token"
MAX_BODY_BYTES = 1 << 20
#: request line and headers, at most (h11's limit for an incomplete event)
MAX_HEAD_BYTES = 16 << 10
#: a whole request (head and body) must arrive within this long of the connection's opening
#: or of the end of the previous reply on it (an idle keep-alive connection is closed then)
READ_TIMEOUT_S = 10.0
#: a reply must be taken by the client within this long
WRITE_TIMEOUT_S = 10.0
#: a closed connection reads what its client still sends for this long at most
LINGER_S = 1.0
#: connections served at once (a thread each); one more is answered 503 and closed
MAX_CONNECTIONS = 32
#: at close, how long connections answering a request may take to send their reply (a
#: POST /api/stop's "applied" raced the close that the stop itself led to)
CLOSE_GRACE_S = 2.0
BACKLOG = 128
#: 401s (and connections refused for the cap): one log line per client per interval at most
REFUSALS_LOG_INTERVAL_S = 60.0
#: clients whose 401s are counted at once (more: the oldest one's count is logged and dropped)
MAX_COUNTED_CLIENTS = 1024

_GET_PATHS = frozenset({"/", "/metrics", "/api/status"})
_POST_PATHS = {path: name for name, path in COMMANDS.items()}

StatusFn = Callable[[], dict[str, Any]]
MetricsFn = Callable[[], bytes]
#: a command the server answers itself instead of posting it (worker processes: the
#: coordinator routes it); None to post it into the queue
Dispatch = Callable[[Command], dict[str, Any]]


def parse_listen(listen: str) -> tuple[str, int]:
    """``"host:port"`` (``[v6]:port`` too) as (host, port), brackets removed."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass(slots=True)
class Reply:
    """One response: status, body, content type and extra headers."""

    status: HTTPStatus
    body: bytes
    ctype: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    close: bool = False  #: close the connection after it


def _json(status: HTTPStatus, payload: object, headers: dict[str, str] | None = None,
          close: bool = False) -> Reply:  # fmt: skip
    data = json.dumps(payload, allow_nan=False, default=str).encode()
    return Reply(status, data, "application/json", headers or {}, close)


def _error(status: HTTPStatus, message: str, close: bool = False,
           headers: dict[str, str] | None = None) -> Reply:  # fmt: skip
    return _json(status, {"error": message}, headers, close)


_BUSY_BODY = b'{"error": "the control API is serving its most connections: retry"}'
#: the reply to a connection over the cap, written whole by the listener thread
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s"
    % (len(_BUSY_BODY), _BUSY_BODY)
)


class _Refusals:
    """Refusals counted per client: the first one logged at once, the next ones in one line per
    client per interval, with their count by reason (thread-safe)."""

    def __init__(self, what: str, interval_s: float = REFUSALS_LOG_INTERVAL_S) -> None:
        self._what = what
        self._interval_s = interval_s
        self._lock = threading.Lock()
        #: client -> (when its last line was logged, reasons counted since)
        self._clients: dict[str, tuple[float, Counter[str]]] = {}

    def refused(self, client: str, reason: str, first_line: str) -> None:
        now = time.monotonic()
        with self._lock:
            entry = self._clients.get(client)
            if entry is not None and now - entry[0] < self._interval_s:
                entry[1][reason] += 1
                return
            lines = [self._line(client, entry[1], now - entry[0])] if entry and entry[1] else []
            self._clients.pop(client, None)
            self._clients[client] = (now, Counter())
            while len(self._clients) > MAX_COUNTED_CLIENTS:
                old = next(iter(self._clients))
                when, counts = self._clients.pop(old)
                if counts:
                    lines.append(self._line(old, counts, now - when))
        for line in lines:
            log.warning("%s", line)
        log.warning("%s", first_line)

    def flush(self, due_only: bool = False) -> None:
        """Log the counts kept (``due_only``: only those whose interval has passed)."""
        now = time.monotonic()
        lines = []
        with self._lock:
            for client, (when, counts) in list(self._clients.items()):
                if counts and (not due_only or now - when >= self._interval_s):
                    lines.append(self._line(client, counts, now - when))
                    self._clients[client] = (now, Counter())
        for line in lines:
            log.warning("%s", line)

    def _line(self, client: str, counts: Counter[str], over_s: float) -> str:
        by = ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()))
        return (f"control API: {counts.total()} more {self._what} from {client} refused in the "
                f"last {over_s:.0f} s ({by})")  # fmt: skip


class _Closed(Exception):
    """The client closed the connection, or it timed out with no request begun."""


class _Timeout(Exception):
    """A request did not arrive whole within READ_TIMEOUT_S."""


class _Connection:
    """One client connection: requests read with h11, answered one at a time (keep-alive)."""

    def __init__(self, control: ControlServer, sock: socket.socket, client: str) -> None:
        self.control, self.sock, self.client = control, sock, client
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        #: the first bytes of the request being read (its method, should h11 refuse it)
        self.prefix = b""

    def serve(self) -> None:
        while True:
            deadline = time.monotonic() + self.control.read_timeout_s
            method, shown = "-", "-"
            self.prefix = self.h11.trailing_data[0][:16]
            try:
                event = self._next(deadline)
                if isinstance(event, h11.ConnectionClosed):
                    return
                assert isinstance(event, h11.Request)
                method = event.method.decode("ascii", "replace")
                shown = self.control.shown_path(event.target)
                reply = self._handle(event, method, deadline)
            except _Closed:
                return
            except _Timeout:
                reply = _error(HTTPStatus.REQUEST_TIMEOUT,
                               f"the request did not arrive within "
                               f"{self.control.read_timeout_s:g} s",
                               close=True)  # fmt: skip
            except h11.RemoteProtocolError as exc:
                status = HTTPStatus(exc.error_status_hint)
                reply = _error(status, f"bad request: {str(exc)[:200]}", close=True)
                if self.prefix.lstrip(b"\r\n").startswith(b"HEAD "):
                    reply.body = b""  # a HEAD h11 could not parse: a reply without a body
            if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
                return
            log.debug("control API %s: %s %s -> %d", self.client, method, shown, reply.status)
            try:
                self._send(reply, method)
            except _Closed:
                return
            if reply.close or _must_close(self.h11):
                return
            try:
                self.h11.start_next_cycle()
            except h11.LocalProtocolError:
                return  # the client's side is not done (a body left unread): close

    def _next(self, deadline: float) -> h11.Event:
        while True:
            event = self.h11.next_event()
            if event is h11.PAUSED:
                raise _Closed  # not reached: a reply ends every request before the next read
            if event is not h11.NEED_DATA:
                assert isinstance(event, h11.Event)
                return event
            left = deadline - time.monotonic()
            started = self.h11.their_state is not h11.IDLE or bool(self.h11.trailing_data[0])
            if left <= 0:
                raise _Timeout if started else _Closed
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                raise _Timeout if started else _Closed from None
            except OSError:
                raise _Closed from None
            if len(self.prefix) < 16 and self.h11.their_state is h11.IDLE:
                self.prefix += data[:16]
            self.h11.receive_data(data)

    def _handle(self, request: h11.Request, method: str, deadline: float) -> Reply:
        headers = dict(request.headers)  # names in lower case (h11)
        if b"transfer-encoding" in headers:
            if b"content-length" in headers:
                return _error(HTTPStatus.BAD_REQUEST, "Content-Length together with "
                              "Transfer-Encoding", close=True)  # fmt: skip
            return _error(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required",
                          close=True)  # fmt: skip
        length = int(headers.get(b"content-length", b"0"))  # h11: only digits get here
        if length > MAX_BODY_BYTES:
            return _error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                          f"request body over {MAX_BODY_BYTES} bytes", close=True)  # fmt: skip
        early = self.control.check(request, headers, self.client)
        if early is not None and length:
            early.close = True  # refused before its body is read: the connection ends here
            return early
        if length and self.h11.they_are_waiting_for_100_continue:
            self._write(self.h11.send(h11.InformationalResponse(status_code=100, headers=[])))
        body = bytearray()
        while not isinstance(event := self._next(deadline), h11.EndOfMessage):
            if isinstance(event, h11.Data):
                body += event.data
        if early is not None:
            return early
        return self.control.route(method, request.target, bytes(body))

    def _send(self, reply: Reply, method: str) -> None:
        headers = [
            ("Content-Type", reply.ctype),
            ("Content-Length", str(len(reply.body))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Server", "frontier-crawl-control"),
            *reply.headers.items(),
        ]
        if reply.close:
            headers.append(("Connection", "close"))
        response = h11.Response(status_code=int(reply.status), headers=headers,
                                reason=reply.status.phrase.encode())  # fmt: skip
        data = self.h11.send(response) or b""
        if method != "HEAD" and reply.body:
            data += self.h11.send(h11.Data(data=reply.body)) or b""
        data += self.h11.send(h11.EndOfMessage()) or b""
        self._write(data)

    def _write(self, data: bytes | None) -> None:
        if not data:
            return
        self.sock.settimeout(WRITE_TIMEOUT_S)
        try:
            self.sock.sendall(data)
        except OSError:
            raise _Closed from None


class ControlServer:
    """The API of one crawl: a listener thread, its token and address files, the queue."""

    def __init__(
        self,
        listen: str,
        output_dir: Path,
        status: StatusFn,
        metrics: MetricsFn,
        *,
        dispatch: Dispatch | None = None,
        dashboard: Callable[[], str] = dashboard_html,
        max_connections: int = MAX_CONNECTIONS,
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        """Bind ``listen`` and write the address and token files (ConfigError naming
        ``control.listen``) if it cannot bind).
        Commands go into :attr:`queue` (the engine drains it) unless ``dispatch`` answers them
        (the coordinator of worker processes)."""
        host, port = parse_listen(listen)
        self.queue = CommandQueue()
        self._status, self._metrics, self._dispatch = status, metrics, dispatch
        self.dashboard = dashboard
        self.read_timeout_s = read_timeout_s
        self._token = secrets.token_urlsafe(32)
        self._dir = output_dir
        try:
            self._sock = _listen(host, port)
        except OSError as exc:
            raise ConfigError(f"control.listen: cannot listen on {listen}: "
                              f"{exc.strerror or exc}") from None  # fmt: skip
        bound_host, self.port = self._sock.getsockname()[:2]
        self.host = str(bound_host)
        self._hosts = {h.lower() for h in (host, "localhost")}
        self._slots = threading.BoundedSemaphore(max_connections)
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._quiet = threading.Condition(self._lock)  #: notified as connections end
        self._unauthorised = _Refusals("request(s)")
        self._busy = _Refusals("connection(s)")
        self._wake_r, self._wake_w = socket.socketpair()
        self._closed = False
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.address = f"{shown}:{self.port}"
        try:
            output_dir.mkdir(parents=True, exist_ok=True)
            _write_private(output_dir / TOKEN_FILE, self._token + "\n")
            _write_private(output_dir / ADDR_FILE, self.address + "\n")
        except BaseException:
            for resource in (self._sock, self._wake_r, self._wake_w):
                resource.close()
            self.queue.close()
            raise
        self._thread = threading.Thread(target=self._accept_loop, name="control-api",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        if not _loopback(host):
            log.warning("control API listening on %s, beyond loopback (token-protected, "
                        "plain HTTP)", self.address)  # fmt: skip
        else:
            log.info("control API on http://%s/", self.address)

    @property
    def token(self) -> str:
        return self._token

    @property
    def connections(self) -> int:
        """Client connections open now."""
        with self._lock:
            return len(self._open)

    # -- the listener thread -------------------------------------------------------------------

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._sock, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._closed:
                ready = selector.select(timeout=1.0)
                self._unauthorised.flush(due_only=True)
                self._busy.flush(due_only=True)
                if any(key.fileobj is self._wake_r for key, _ in ready) or self._closed:
                    return
                if ready:
                    self._accept()

    def _accept(self) -> None:
        try:
            sock, address = self._sock.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # out of file descriptors: wait a little, do not spin
            self._busy.refused("-", "cannot accept", "control API: cannot accept a connection: "
                               f"{exc.strerror or exc}")  # fmt: skip
            time.sleep(0.1)
            return
        client = str(address[0])
        if not self._slots.acquire(blocking=False):
            self._busy.refused(client, "at the cap", f"control API: a connection from {client} "
                               "refused (503): the API is serving its most connections already")
            _refuse(sock)
            return
        with self._lock:
            self._open.add(sock)
        thread = threading.Thread(target=self._serve, args=(sock, client),
                                  name="control-api-client", daemon=True)  # fmt: skip
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: refuse, as at the cap
            self._release(sock)
            _refuse(sock)

    def _serve(self, sock: socket.socket, client: str) -> None:
        try:
            _Connection(self, sock, client).serve()
        except Exception:
            log.exception("control API: the connection from %s failed", client)
        finally:
            _linger_close(sock)
            self._release(sock)

    def _release(self, sock: socket.socket) -> None:
        with self._lock:
            if sock not in self._open:
                return
            self._open.discard(sock)
            self._quiet.notify_all()
        self._slots.release()

    # -- called from the connection threads ----------------------------------------------------

    def shown_path(self, target: bytes) -> str:
        """A request target as a log line may show it: its path only (no query, no
        authority), at most 200 characters, the token masked wherever it is."""
        path = target.decode("ascii", "replace").partition("?")[0]
        if "://" in path:
            path = "/" + path.partition("://")[2].partition("/")[2]
        return path[:200].replace(self._token, "<token>")

    def check(self, request: h11.Request, headers: dict[bytes, bytes],
              client: str) -> Reply | None:  # fmt: skip
        """The checks before a request's body is read: its authority, OPTIONS, the token.
        None when they pass."""
        target = request.target.decode("ascii", "replace")
        path = _path_of(target)
        if path is None:
            return _error(HTTPStatus.BAD_REQUEST, "the request target must be a path or an "
                          "http:// URL of this listener")  # fmt: skip
        authority = target.partition("://")[2].partition("/")[0] if "://" in target else None
        host = headers.get(b"host")
        if not self.host_ok(host.decode("latin-1") if host is not None else None) or (
            authority is not None and not self.host_ok(authority)
        ):
            return _error(HTTPStatus.MISDIRECTED_REQUEST, "wrong Host header or request target")
        if request.method == b"OPTIONS":
            return _error(HTTPStatus.METHOD_NOT_ALLOWED, f"{path}: OPTIONS is not served",
                          headers={"Allow": _allowed(path)})  # fmt: skip
        query = urlsplit(target).query if path == "/" else ""
        query_token = parse_qs(query).get("token", [""])[0] if query else ""
        auth = headers.get(b"authorization")
        authorization = auth.decode("latin-1") if auth is not None else None
        if not self.token_ok(authorization, query_token):
            reason = "wrong token" if authorization or query_token else "no token"
            method = request.method.decode("ascii", "replace")
            self._unauthorised.refused(client, reason, f"control API: {method} "
                                       f"{self.shown_path(request.target)} from {client} "
                                       f"refused: {reason}")  # fmt: skip
            # closed after it: a client without the token pays a connection per try
            return _error(HTTPStatus.UNAUTHORIZED, "a valid bearer token is required",
                          close=True,
                          headers={"WWW-Authenticate": 'Bearer realm="frontier-crawl"'})
        return None

    def route(self, method: str, target: bytes, body: bytes) -> Reply:
        """A request that passed :meth:`check`, its body read."""
        path = _path_of(target.decode("ascii", "replace")) or "/"
        try:
            return self._route(method, path, body)
        except Exception as exc:
            log.exception("control API: %s %s failed", method, self.shown_path(target))
            return _error(HTTPStatus.INTERNAL_SERVER_ERROR, repr(exc), close=True)

    def _route(self, method: str, path: str, body: bytes) -> Reply:
        if path in _GET_PATHS:
            if method != "GET":
                return _error(HTTPStatus.METHOD_NOT_ALLOWED, f"{path}: use GET",
                              headers={"Allow": "GET"})  # fmt: skip
            return self._get(path)
        name = _POST_PATHS.get(path)
        if name is None:
            return _error(HTTPStatus.NOT_FOUND, f"no such endpoint: {path}")
        if method != "POST":
            return _error(HTTPStatus.METHOD_NOT_ALLOWED, f"{path}: use POST",
                          headers={"Allow": "POST"})  # fmt: skip
        parsed: object = None
        if body.strip():
            try:
                parsed = json.loads(body)
            except (ValueError, RecursionError) as exc:
                return _error(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {exc}")
        try:
            command = parse_command(name, parsed)
        except BadCommand as exc:
            return _error(HTTPStatus.BAD_REQUEST, str(exc))
        return _json(HTTPStatus.OK, self.execute(command))

    def _get(self, path: str) -> Reply:
        if path == "/api/status":
            return _json(HTTPStatus.OK, self.status())
        if path == "/metrics":
            try:
                text = self.metrics()
            except NotImplementedError:
                return _error(HTTPStatus.NOT_FOUND, "metrics are not available")
            return Reply(HTTPStatus.OK, text, "text/plain; version=0.0.4; charset=utf-8")
        page = self.dashboard()
        return Reply(HTTPStatus.OK, page.encode(), "text/html; charset=utf-8", {
            "Content-Security-Policy": content_security_policy(page, frame_ancestors=True),
            "Referrer-Policy": "no-referrer",
        })  # fmt: skip

    def host_ok(self, header: str | None) -> bool:
        """The Host header (or an absolute-form target's authority) names this listener (see
        the module docstring)."""
        if not header or any(c in header for c in "/?#@\\"):
            return False
        try:
            split = urlsplit("//" + header.strip())
            name, port = (split.hostname or "").lower(), split.port
        except ValueError:
            return False
        if port != self.port:
            return False
        if name in self._hosts:
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True

    def token_ok(self, authorization: str | None, query_token: str) -> bool:
        given = ""
        if authorization and authorization[:7].lower() == "bearer ":
            given = authorization[7:].strip()
        elif query_token:
            given = query_token
        return bool(given) and hmac.compare_digest(given.encode(), self._token.encode())

    def status(self) -> dict[str, Any]:
        return self._status()

    def metrics(self) -> bytes:
        return self._metrics()

    def execute(self, command: Command) -> dict[str, Any]:
        if self._dispatch is not None:
            return self._dispatch(command)
        return self.queue.call(command)

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening, close the clients' connections, answer queued commands, remove the
        address and token files, log the refusals still counted."""
        if self._closed:
            return
        self._closed = True
        for name in (ADDR_FILE, TOKEN_FILE):
            with contextlib.suppress(FileNotFoundError):
                (self._dir / name).unlink()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        self._thread.join(5)
        self._sock.close()
        with self._lock:
            clients = list(self._open)
        for sock in clients:  # wakes a thread blocked in recv (it then closes the socket),
            with contextlib.suppress(OSError):  # while a reply being made still goes out
                sock.shutdown(socket.SHUT_RD)
        with self._quiet:  # (the reply to the command that led to this close, say)
            self._quiet.wait_for(lambda: not self._open, CLOSE_GRACE_S)
            clients = list(self._open)
        for sock in clients:  # a client that does not read its reply: cut off
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._wake_r.close()
        self._wake_w.close()
        self.queue.close()
        self._unauthorised.flush()
        self._busy.flush()


def _must_close(conn: h11.Connection) -> bool:
    return conn.our_state is h11.MUST_CLOSE


def _path_of(target: str) -> str | None:
    """The path of an origin-form (``/x?y``) or ``http://`` absolute-form target; None for
    any other form (``*``, ``host:port``, another scheme)."""
    if target.startswith("/"):
        return target.partition("?")[0].partition("#")[0]
    if target[:7].lower() == "http://":
        rest = target[7:].partition("/")
        return "/" + rest[2].partition("?")[0].partition("#")[0] if rest[0] else None
    return None


def _allowed(path: str) -> str:
    if path in _GET_PATHS:
        return "GET"
    if path in _POST_PATHS:
        return "POST"
    return "GET, POST"


def _linger_close(sock: socket.socket) -> None:
    """Close a connection so the client reads the last reply: end our side, then read what
    the client still sends (a pipelined request, the rest of a refused body; at most
    :data:`MAX_BODY_BYTES` and :data:`LINGER_S`) before closing, or the kernel would answer
    it with a reset that can discard the reply from the client's buffer."""
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + LINGER_S
        left = MAX_BODY_BYTES
        while left > 0 and (wait := deadline - time.monotonic()) > 0:
            sock.settimeout(wait)
            data = sock.recv(65536)
            if not data:
                break
            left -= len(data)
    except OSError:
        pass
    finally:
        sock.close()


def _refuse(sock: socket.socket) -> None:
    """Answer 503 on a connection over the cap without waiting for anything, and close it."""
    try:
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.recv(65536)  # what the client sent already: a close then sends no reset
        with contextlib.suppress(OSError):
            sock.send(_BUSY)
            sock.shutdown(socket.SHUT_WR)
    finally:
        sock.close()


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read, whole: a fresh temporary file (a random name,
    ``O_EXCL``: nothing planted is opened or followed) renamed over ``path`` (a symlink there
    is replaced, not followed), so a reader sees no file or all of it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
