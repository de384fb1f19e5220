"""The control API: an HTTP listener (JSON in and out) in a daemon thread.

``[control] listen = "127.0.0.1:8740"`` turns it on (it is off by default). Port 0 takes any
free port; the address bound is written to ``output_dir/control.addr`` and a fresh token to
``output_dir/control.token`` (mode 0600, regenerated at every start), which ``frontier-crawl
ctl`` reads. Both files are removed when the crawl ends.

Rules, every request:

* ``Authorization: Bearer <token>`` (compared with ``hmac.compare_digest``); missing or wrong:
  401, and a warning in the log naming the client address. ``GET /`` alone may bring the token
  as ``?token=`` (the dashboard's link; its script moves it into the header).
* The Host header must name this listener: the listen host, ``localhost`` or an IP literal,
  with the bound port. Anything else (a DNS-rebinding page, whose Host is the attacker's name)
  is 421, before the token is looked at.
* No CORS headers (a browser page from elsewhere cannot read a reply, nor send the token
  header without a preflight that is answered 405); GET never changes anything.
* Bodies: JSON objects, at most :data:`MAX_BODY_BYTES`; a slow client is cut after
  :data:`READ_TIMEOUT_S`. Errors: 400 ``{"error": ...}`` for a bad body, 404 for an unknown path,
  405 (with ``Allow``) for a known path and the wrong method, 413 for a body too large.

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
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from frontier_crawl.config import ConfigError
from frontier_crawl.control.commands import (
    COMMANDS,
    BadCommand,
    Command,
    CommandQueue,
    parse_command,
)

__all__ = ["ADDR_FILE", "TOKEN_FILE", "ControlServer", "parse_listen"]

log = logging.getLogger(__name__)

ADDR_FILE = "control.addr"
TOKEN_FILE = "control.token"
MAX_BODY_BYTES = 1 << 20
READ_TIMEOUT_S = 10.0

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


def _placeholder_dashboard() -> str:
    return (
        "<!doctype html><meta charset=utf-8><title>frontier-crawl</title>"
        "<p>frontier-crawl control API: see <code>/api/status</code>.</p>"
    )


def _dashboard() -> str:
    try:
        from frontier_crawl.control.dashboard import (  # type: ignore[import-not-found,unused-ignore]
            dashboard_html,
        )
    except ImportError:
        return _placeholder_dashboard()
    return str(dashboard_html())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    control: ControlServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = READ_TIMEOUT_S  # the socket's timeout: a client that stalls is cut
    protocol_version = "HTTP/1.1"
    server_version = "frontier-crawl-control"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("control API %s: " + format, self.client_address[0], *args)

    # -- the methods ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_OPTIONS(self) -> None:
        self._serve("OPTIONS")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    # -- one request ---------------------------------------------------------------------------

    def _serve(self, method: str) -> None:
        try:
            self._route(method)
        except OSError:  # the client went away, or timed out (READ_TIMEOUT_S)
            self.close_connection = True
        except Exception as exc:
            log.exception("control API: %s %s failed", method, self.path)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": repr(exc)})

    def _route(self, method: str) -> None:
        control = self.server.control
        url = urlsplit(self.path)
        path = url.path
        if not control.host_ok(self.headers.get("Host")):
            self._drain()
            self._json(HTTPStatus.MISDIRECTED_REQUEST, {"error": "wrong Host header"})
            return
        query_token = parse_qs(url.query).get("token", [""])[0] if path == "/" else ""
        if not control.token_ok(self.headers.get("Authorization"), query_token):
            log.warning(
                "control API: %s %s from %s refused: %s token",
                method, path, self.client_address[0],
                "wrong" if self.headers.get("Authorization") or query_token else "no",
            )  # fmt: skip
            self._drain()
            self._json(HTTPStatus.UNAUTHORIZED, {"error": "a valid bearer token is required"},
                       extra={"WWW-Authenticate": 'Bearer realm="frontier-crawl"'})  # fmt: skip
            return
        if path in _GET_PATHS:
            if method != "GET":
                self._drain()
                self._json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"{path}: use GET"},
                           extra={"Allow": "GET"})  # fmt: skip
                return
            self._drain()
            self._get(path)
            return
        name = _POST_PATHS.get(path)
        if name is None:
            self._drain()
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such endpoint: {path}"})
            return
        if method != "POST":
            self._drain()
            self._json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"{path}: use POST"},
                       extra={"Allow": "POST"})  # fmt: skip
            return
        body = self._body()
        if body is _TOO_LARGE:
            return
        if isinstance(body, _BadJson):
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"the body is not JSON: {body.problem}"})
            return
        try:
            command = parse_command(name, body)
        except BadCommand as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        self._json(HTTPStatus.OK, control.execute(command))

    def _get(self, path: str) -> None:
        control = self.server.control
        if path == "/api/status":
            self._json(HTTPStatus.OK, control.status())
        elif path == "/metrics":
            try:
                text = control.metrics()
            except NotImplementedError:
                self._json(HTTPStatus.NOT_FOUND, {"error": "metrics are not available"})
                return
            self._send(HTTPStatus.OK, text, "text/plain; version=0.0.4; charset=utf-8")
        else:
            page = control.dashboard().encode()
            self._send(HTTPStatus.OK, page, "text/html; charset=utf-8",
                       extra={"Content-Security-Policy": "default-src 'self' 'unsafe-inline'; "
                              "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
                              "Referrer-Policy": "no-referrer"})  # fmt: skip

    def _length(self) -> int | None:
        raw = self.headers.get("Content-Length")
        if raw is None:
            return 0 if self.headers.get("Transfer-Encoding") is None else None
        try:
            n = int(raw)
        except ValueError:
            return None
        return n if n >= 0 else None

    def _drain(self) -> None:
        """Read (a small) unread body so the connection stays in step, else close it."""
        n = self._length()
        if n is None or n > MAX_BODY_BYTES:
            self.close_connection = True
            return
        if n:
            try:
                self.rfile.read(n)
            except OSError:
                self.close_connection = True

    def _body(self) -> object:
        n = self._length()
        if n is None:
            self.close_connection = True
            self._json(HTTPStatus.LENGTH_REQUIRED, {"error": "a Content-Length is required"})
            return _TOO_LARGE
        if n > MAX_BODY_BYTES:
            self.close_connection = True
            self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                       {"error": f"request body over {MAX_BODY_BYTES} bytes"})  # fmt: skip
            return _TOO_LARGE
        data = self.rfile.read(n) if n else b""
        if len(data) < n:
            self.close_connection = True
            return _TOO_LARGE  # the client went away (or timed out): nothing to answer
        if not data.strip():
            return None
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            return _BadJson(str(exc))

    def _json(
        self, status: HTTPStatus, payload: object, extra: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload, allow_nan=False, default=str).encode()
        self._send(status, data, "application/json", extra)

    def _send(
        self, status: HTTPStatus, data: bytes, ctype: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


class _BadJson:
    """A body that is not JSON (parse_command answers it with a 400 naming the problem)."""

    def __init__(self, problem: str) -> None:
        self.problem = problem


_TOO_LARGE = object()


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
        dashboard: Callable[[], str] = _dashboard,
    ) -> None:
        """Bind ``listen`` and write the address and token files (ConfigError naming
        ``control.listen``) if it cannot bind).
        Commands go into :attr:`queue` (the engine drains it) unless ``dispatch`` answers them
        (the coordinator of worker processes)."""
        host, port = parse_listen(listen)
        self.queue = CommandQueue()
        self._status, self._metrics, self._dispatch = status, metrics, dispatch
        self.dashboard = dashboard
        self._token = secrets.token_urlsafe(32)
        self._dir = output_dir
        _Server.address_family = _family(host)
        try:
            self._httpd = _Server((host, port), _Handler)
        except OSError as exc:
            raise ConfigError(f"control.listen: cannot listen on {listen}: "
                              f"{exc.strerror or exc}") from None  # fmt: skip
        self._httpd.control = self
        bound_host, self.port = self._httpd.server_address[:2]
        self.host = str(bound_host)
        self._hosts = {h.lower() for h in (host, "localhost")}
        output_dir.mkdir(parents=True, exist_ok=True)
        _write_private(output_dir / TOKEN_FILE, self._token + "\n")
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.address = f"{shown}:{self.port}"
        _write_private(output_dir / ADDR_FILE, self.address + "\n")
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="control-api", daemon=True
        )
        self._thread.start()
        if not _loopback(host):
            log.warning("control API listening on %s, beyond loopback (token-protected, "
                        "plain HTTP)", self.address)  # fmt: skip
        else:
            log.info("control API on http://%s/", self.address)

    @property
    def token(self) -> str:
        return self._token

    # -- called from the handler threads -----------------------------------------------------

    def host_ok(self, header: str | None) -> bool:
        """The Host header names this listener (see the module docstring)."""
        if not header:
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
        """Stop listening, answer queued commands, remove the address and token files."""
        for name in (ADDR_FILE, TOKEN_FILE):
            with contextlib.suppress(FileNotFoundError):
                (self._dir / name).unlink()
        self._httpd.shutdown()
        self._httpd.server_close()
        self.queue.close()


def _family(host: str) -> Any:
    import socket

    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (a fresh inode: an old file's mode is not kept)."""
    tmp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    tmp.replace(path)
