"""A loopback site whose pages change at known rates, for continuous-crawling tests.

A few hosts, each a threaded HTTP server of its own on its own loopback address
(``127.0.0.2``, ``127.0.0.3``... port 0), named ``h0.recrawl.test``... for ``fetch.resolve``.
Every host serves:

- ``/``: an index linking to every page below (never changes; ETag and Last-Modified);
- ``/fast``: a new version every ``fast_period_s`` (ETag and Last-Modified);
- ``/etag``: a new version every ``2 * fast_period_s``, an ETag only;
- ``/static``: never changes, ETag and Last-Modified;
- ``/lastmod``: never changes, Last-Modified only;
- ``/plain``: never changes, no validator (a revisit gets a 200 with the same payload);
- ``/vanish``: a 200 until ``vanish_after_s`` after the host's first request for it
  (:attr:`RecrawlSite.vanish_at`: counted from the crawl's first visit, not from the site's
  start, so a crawler slow to start on a loaded machine still sees it before it goes), then a
  404 (host 0), a 410 (host 1), or a 301 to ``/static`` (the others);
- ``/robots.txt``: allow all.

A page's version ``k`` starts at ``start + k * period`` (wall clock, ``time.time()``), its
ETag is ``"<path>-<k>"``, its Last-Modified that start time (HTTP date, whole seconds: the
versions of a page are spaced by 2 s or more). Pages are padded past 20 KB (about 28 KB).
Conditional requests are answered as RFC 9110 section 13.2.2 says: If-None-Match first (a
match, ``*`` or a list, weak comparison: 304), If-Modified-Since only without it (the page's
Last-Modified not after the date given: 304); a 304 carries the page's validators.

Every request is logged (:class:`Hit`): when it arrived and when its answer was sent (wall and
monotonic), its host, path and headers, the status sent and the version served.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import Message
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

#: the pages of every host besides ``/`` and ``/robots.txt``
PATHS = ("/fast", "/etag", "/static", "/lastmod", "/plain", "/vanish")


@dataclass(frozen=True, slots=True)
class Hit:
    """One request as the server saw it."""

    host: str  #: the Host name (without the port)
    path: str
    headers: dict[str, str]  #: request headers, names lower-cased (repeats joined by ", ")
    status: int  #: the status sent
    version: int  #: the page's version served (-1: none, a 404 or robots.txt)
    arrived: float  #: time.time() when the request line was read
    arrived_mono: float  #: time.monotonic() of the same instant
    finished_mono: float  #: time.monotonic() when the answer was sent

    @property
    def conditional(self) -> bool:
        return "if-none-match" in self.headers or "if-modified-since" in self.headers


@dataclass(frozen=True, slots=True)
class Page:
    """What one path of one host is at one instant."""

    status: int
    version: int
    body: bytes = b""
    etag: str | None = None
    last_modified: str | None = None
    location: str | None = None


@dataclass
class RecrawlSite:
    """The pages (a pure function of the time) and the servers that serve them."""

    hosts: int = 3
    fast_period_s: float = 3.0
    vanish_after_s: float = 20.0
    start: float = field(default_factory=time.time)
    _servers: list[ThreadingHTTPServer] = field(default_factory=list, init=False)
    _threads: list[threading.Thread] = field(default_factory=list, init=False)
    _hits: list[Hit] = field(default_factory=list, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    #: host -> when its ``/vanish`` goes (wall clock), set by the first request for it
    vanish_at: dict[str, float] = field(default_factory=dict, init=False)

    # ---------------------------------------------------------------------------- the pages

    def names(self) -> list[str]:
        return [f"h{i}.recrawl.test" for i in range(self.hosts)]

    def period(self, path: str) -> float | None:
        """How often ``path`` changes (None: never)."""
        if path == "/fast":
            return self.fast_period_s
        if path == "/etag":
            return 2 * self.fast_period_s
        return None

    def version(self, path: str, now: float) -> int:
        period = self.period(path)
        return 0 if period is None else max(0, math.floor((now - self.start) / period))

    def changes(self, path: str, until: float) -> list[float]:
        """When ``path`` changed (version 1 onwards), up to ``until``."""
        period = self.period(path)
        if period is None:
            return []
        return [self.start + k * period for k in range(1, int((until - self.start) / period) + 1)]

    def page(self, host: str, path: str, now: float) -> Page:
        index = self.names().index(host) if host in self.names() else -1
        if index < 0 or (path not in PATHS and path != "/"):
            return Page(404, -1, b"not here\n")
        if path == "/vanish" and now >= self.vanish_at.setdefault(host, now + self.vanish_after_s):
            if index == 0:
                return Page(404, -1, b"gone\n")
            if index == 1:
                return Page(410, -1, b"gone for good\n")
            return Page(301, -1, b"", location="/static")
        k = self.version(path, now)
        born = self.start + k * (self.period(path) or 0.0)
        etag = f'"{path.strip("/") or "index"}-{k}"'
        stamp = formatdate(math.floor(born), usegmt=True)
        validators = {
            "/etag": (etag, None), "/lastmod": (None, stamp), "/plain": (None, None),
        }.get(path, (etag, stamp))  # fmt: skip
        return Page(200, k, self.body(host, path, k), *validators)

    def body(self, host: str, path: str, k: int) -> bytes:
        links = "".join(f'<li><a href="{p}">{p}</a></li>' for p in PATHS) if path == "/" else ""
        seed = hashlib.sha1(f"{host}{path}{k}".encode()).hexdigest()
        filler = "".join(f"<p>{seed} line {i} of version {k}</p>\n" for i in range(400))
        text = (f"<!DOCTYPE html><html><head><title>{host}{path} v{k}</title></head><body>"
                f"<h1>{path} version {k}</h1><ul>{links}</ul>{filler}</body></html>")  # fmt: skip
        return text.encode()

    # ---------------------------------------------------------------------------- serving

    def __enter__(self) -> RecrawlSite:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                arrived, mono = time.time(), time.monotonic()
                host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
                path = self.path.split("?", 1)[0]
                if path == "/robots.txt":
                    page = Page(200, -1, b"User-agent: *\nAllow: /\n")
                else:
                    page = site.page(host, path, arrived)
                status = page.status
                if status == 200 and _not_modified(self.headers, page):
                    status = 304
                self.send_response(status)
                if page.etag:
                    self.send_header("ETag", page.etag)
                if page.last_modified:
                    self.send_header("Last-Modified", page.last_modified)
                if page.location:
                    self.send_header("Location", page.location)
                body = page.body if status != 304 else b""
                if status != 304:
                    kind = "text/plain" if path == "/robots.txt" else "text/html"
                    self.send_header("Content-Type", f"{kind}; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                seen: dict[str, str] = {}
                for name, value in self.headers.items():  # a repeated header: joined by ", "
                    name = name.lower()
                    seen[name] = f"{seen[name]}, {value}" if name in seen else value
                hit = Hit(host, path, seen, status, page.version, arrived, mono, time.monotonic())
                with site._lock:
                    site._hits.append(hit)

        for i in range(self.hosts):
            server = ThreadingHTTPServer((f"127.0.0.{i + 2}", 0), Handler)
            server.daemon_threads = True
            thread = threading.Thread(target=server.serve_forever, name=f"recrawl-{i}",
                                      kwargs={"poll_interval": 0.05}, daemon=True)  # fmt: skip
            thread.start()
            self._servers.append(server)
            self._threads.append(thread)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(5)

    def port(self, i: int) -> int:
        return int(self._servers[i].server_address[1])

    def seeds(self) -> list[str]:
        return [f"http://{name}:{self.port(i)}/" for i, name in enumerate(self.names())]

    def resolve_entries(self) -> list[str]:
        return [f"{name}:{self.port(i)}:127.0.0.{i + 2}" for i, name in enumerate(self.names())]

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port(self.names().index(host))}{path}"

    def hits(self) -> list[Hit]:
        """Every request so far, in the order their answers were sent."""
        with self._lock:
            return list(self._hits)

    def pages(self, since: int = 0) -> Iterator[Hit]:
        """The requests for pages (not robots.txt) from log entry ``since`` on."""
        return (h for h in self.hits()[since:] if h.path != "/robots.txt")


def _not_modified(headers: Message, page: Page) -> bool:
    """RFC 9110 13.2.2: If-None-Match decides when present; else If-Modified-Since."""
    get = headers.get
    inm = get("If-None-Match")
    if inm is not None:
        if page.etag is None:
            return False
        tags = {t.strip().removeprefix("W/") for t in inm.split(",")}
        return "*" in tags or page.etag.removeprefix("W/") in tags
    ims = get("If-Modified-Since")
    if ims is None or page.last_modified is None:
        return False
    try:
        return parsedate_to_datetime(page.last_modified) <= parsedate_to_datetime(ims)
    except (TypeError, ValueError):
        return False  # an unreadable date is ignored (RFC 9110 13.1.3)
