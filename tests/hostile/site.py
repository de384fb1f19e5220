"""The hostile site: one host name per misbehaviour, all linked from ``www``'s root page.

Every case host is ``<case>.hostile.test`` and is mapped to the one raw-socket server by
``fetch.resolve`` entries, so no name ever reaches a resolver and politeness (one connection
per host) does not serialise the slow cases behind each other. robots.txt is a 404 everywhere
(allow all). Names outside the resolve list (``outside.example``, broken IPv6 literals) are out of
scope and must never be requested, let alone resolved.
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tests.hostile.server import Blackhole, Exchange, RawHttpServer

__all__ = ["DOMAIN", "GZIP_BOMB_DECODED", "HostileSite", "gzip_bomb_stream"]

DOMAIN = "hostile.test"
MB = 1 << 20
GZIP_BOMB_DECODED = 1100 * MB  #: > 1 GB decoded
MANY_LINKS = 10_000
CHAIN_HOPS = 10
LONG_URL_CHARS = 10 * 1024


def _page(*links: str, extra: str = "") -> bytes:
    anchors = "".join(f'<a href="{u}">link</a>\n' for u in links)
    return f"<!doctype html><html><head>{extra}</head><body>{anchors}</body></html>\n".encode()


# -- the gzip bomb, streamed ----------------------------------------------------------------


@functools.cache
def _bomb_parts() -> tuple[bytes, bytes, bytes]:
    """(first block, repeated block, final block) of a raw deflate stream of zeros.

    A full flush resets the compressor's state, so after it compressing the same 1 MiB of zeros
    always gives the same bytes: the stream is first + repeated * n + final, without ever
    holding the decoded gigabyte or compressing it.
    """
    comp = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    zeros = bytes(MB)
    first = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    repeated = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    again = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    assert repeated == again
    return first, repeated, comp.flush(zlib.Z_FINISH)


def gzip_bomb_stream(decoded_bytes: int = GZIP_BOMB_DECODED) -> Iterator[bytes]:
    """A valid single-member gzip stream of ``decoded_bytes`` zeros (a multiple of 1 MiB)."""
    first, repeated, final = _bomb_parts()
    blocks = decoded_bytes // MB
    yield b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # gzip header, no name, mtime 0
    yield first
    for _ in range(blocks - 1):
        yield repeated
    yield final
    crc = 0
    zeros = bytes(MB)
    for _ in range(blocks):  # only reached by a client that reads the whole bomb
        crc = zlib.crc32(zeros, crc)
    yield struct.pack("<II", crc, decoded_bytes & 0xFFFFFFFF)


def _chunked(ex: Exchange, parts: Iterator[bytes], headers: list[tuple[str, str]]) -> None:
    ex.keep_alive = False
    ex.head(200, [*headers, ("Transfer-Encoding", "chunked"), ("Connection", "close")])
    for part in parts:
        if ex.stop.is_set():
            return
        ex.send(b"%x\r\n%s\r\n" % (len(part), part))
    ex.send(b"0\r\n\r\n")


# -- the cases ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostileSite:
    """Routes of the hostile site for a server listening on ``port``."""

    port: int
    max_body_bytes: int
    blackhole_port: int = 0  #: a listener that never completes a connect (0: no such case)

    # names and URLs

    def host(self, case: str) -> str:
        return f"{case}.{DOMAIN}"

    def url(self, case: str, path: str = "/") -> str:
        return f"http://{self.host(case)}:{self.port}{path}"

    @property
    def cases(self) -> dict[str, str]:
        """Case name -> entry path (the root page links to each)."""
        return {
            "loop": "/a",
            "chain": "/hop/0",
            "slow-headers": "/",
            "trickle": "/",
            "drip": "/",
            "reset": "/",
            "short": "/",
            "bomb": "/",
            "big": "/",
            "links": "/",
            "calendar": "/cal/2024-01",
            "errors": "/",
            "media": "/",
            "charset": "/",
            "hrefs": "/",
            "base": "/",
            "offsite": "/",
            "schemes": "/",
            "empty": "/",
            "cut-chunked": "/",
        }

    @property
    def hosts(self) -> list[str]:
        return [self.host("www"), self.host("other"), *(self.host(c) for c in self.cases)]

    def resolve_entries(self) -> list[str]:
        entries = [f"{h}:{self.port}:127.0.0.1" for h in self.hosts]
        if self.blackhole_port:
            entries.append(f"{self.host('connect-stall')}:{self.blackhole_port}:127.0.0.1")
        return entries

    @property
    def connect_stall_url(self) -> str:
        return f"http://{self.host('connect-stall')}:{self.blackhole_port}/"

    @property
    def seed(self) -> str:
        return self.url("www")

    # dispatch

    def __call__(self, ex: Exchange) -> None:
        host, path = ex.request.host, ex.request.path
        if path == "/robots.txt":
            ex.reply(404, b"no robots here\n", content_type="text/plain")
            return
        case = host.removesuffix(f".{DOMAIN}")
        handler: Callable[[Exchange], None] | None = getattr(
            self, "_" + case.replace("-", "_"), None
        )
        if handler is None or not host.endswith(DOMAIN):
            ex.reply(404, b"unknown host\n")
            return
        handler(ex)

    def _www(self, ex: Exchange) -> None:
        if ex.request.path != "/":
            ex.reply(404, b"not found\n")
            return
        links = [self.url(c, p) for c, p in self.cases.items()]
        if self.blackhole_port:
            links.append(self.connect_stall_url)
        ex.reply(200, _page(*links))

    def _other(self, ex: Exchange) -> None:
        ex.reply(200, _page() if ex.request.path == "/landing" else b"", content_type="text/html")

    def _loop(self, ex: Exchange) -> None:
        target = {"/a": "/b", "/b": "/a"}.get(ex.request.path)
        if target is None:
            ex.reply(404, b"")
        else:
            ex.reply(302, b"", [("Location", target)])

    def _chain(self, ex: Exchange) -> None:
        n = int(ex.request.path.rsplit("/", 1)[1] or 0)
        if n >= CHAIN_HOPS:
            ex.reply(200, _page())
        else:
            ex.reply(302, b"", [("Location", f"/hop/{n + 1}")])

    def _slow_headers(self, ex: Exchange) -> None:
        ex.keep_alive = False
        ex.wait_closed(20)  # no byte until the crawler gives up (or the server stops)

    def _trickle(self, ex: Exchange) -> None:
        ex.keep_alive = False
        ex.head(200, [("Content-Type", "text/html"), ("Content-Length", "100")])
        for _ in range(100):  # 1 byte/s, until the crawler gives up
            ex.send(b"x")
            if ex.wait_closed(1.0):
                return

    def _drip(self, ex: Exchange) -> None:
        # 800 B/s: far above the test's low-speed limit (100 B/s over 2 s; libcurl samples the
        # speed once a second, and over a 1 s window it aborted transfers like this one after
        # exactly 1 s), but 8,000 bytes take longer than the total timeout
        ex.keep_alive = False
        ex.head(200, [("Content-Type", "text/html"), ("Content-Length", "8000")])
        for _ in range(100):
            ex.send(b"d" * 80)
            if ex.wait_closed(0.1):
                return

    def _reset(self, ex: Exchange) -> None:
        ex.head(200, [("Content-Type", "text/html"), ("Content-Length", "10000")])
        ex.send(b"<html>" + b"r" * 994)
        ex.wait(0.05)
        ex.reset()

    def _short(self, ex: Exchange) -> None:
        ex.keep_alive = False
        ex.head(200, [("Content-Type", "text/html"), ("Content-Length", "1000")])
        ex.send(b"<html>" + b"s" * 94)  # 100 of 1000 bytes, then FIN

    def _bomb(self, ex: Exchange) -> None:
        _chunked(
            ex, gzip_bomb_stream(), [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]
        )

    def _big(self, ex: Exchange) -> None:
        if ex.request.path == "/":
            ex.reply(200, _page("/chunked", "/announced"))
        elif ex.request.path == "/chunked":  # no Content-Length: the size cap must abort it
            block = b"b" * 65536
            n = self.max_body_bytes // len(block) + 2
            _chunked(ex, iter([block] * n), [("Content-Type", "text/html")])
        else:  # Content-Length over the cap: refused before the body
            ex.keep_alive = False
            ex.head(
                200,
                [("Content-Type", "text/html"), ("Content-Length", str(2 * self.max_body_bytes))],
            )
            block = b"B" * 65536
            for _ in range(2 * self.max_body_bytes // len(block)):
                if ex.stop.is_set():
                    return
                ex.send(block)

    def _links(self, ex: Exchange) -> None:
        if ex.request.path == "/":
            ex.reply(200, _page(*(f"/p/{i}" for i in range(MANY_LINKS))))
        else:
            ex.reply(200, b"<html><body>leaf</body></html>")

    def _calendar(self, ex: Exchange) -> None:
        try:
            year, month = (int(x) for x in ex.request.path.rsplit("/", 1)[1].split("-"))
        except ValueError:
            ex.reply(404, b"")
            return
        nxt = f"/cal/{year + month // 12}-{month % 12 + 1:02d}"
        prev = f"/cal/{year - (month == 1)}-{(month - 2) % 12 + 1:02d}"
        ex.reply(200, _page(nxt, prev, f"/cal/{year + 1}-{month:02d}"))

    def _errors(self, ex: Exchange) -> None:
        path = ex.request.path
        if path == "/":
            ex.reply(200, _page("/500", "/503", "/429"))
        elif path == "/500":
            ex.reply(500, b"oops\n")
        elif path == "/503":
            ex.reply(503, b"later\n", [("Retry-After", "1")])
        elif path == "/429":
            ex.reply(429, b"slow down\n", [("Retry-After", "1")])
        else:
            ex.reply(404, b"")

    def _media(self, ex: Exchange) -> None:
        path = ex.request.path
        bait = b"<html><a href='/from-media'>bait</a></html>"
        if path == "/":
            ex.reply(200, _page("/doc.pdf", "/img.png"))
        elif path == "/doc.pdf":
            ex.reply(200, b"%PDF-1.4\n" + bait + b"\n%%EOF\n", content_type="application/pdf")
        elif path == "/img.png":
            ex.reply(200, b"\x89PNG\r\n\x1a\n" + bait, content_type="image/png")
        else:
            ex.reply(404, b"")

    def _charset(self, ex: Exchange) -> None:
        if ex.request.path == "/":
            body = "<html><body>caf\xe9 \xff\xfe <a href='/after-bad-bytes'>x</a></body></html>"
            ex.reply(200, body.encode("latin-1"), content_type="text/html; charset=utf-8")
        else:
            ex.reply(200, b"<html>ok</html>")

    def _hrefs(self, ex: Exchange) -> None:
        if ex.request.path != "/":
            ex.reply(404, b"not a file, just a 404\n")
            return
        long_path = "/" + "l" * LONG_URL_CHARS
        ex.reply(
            200,
            _page(
                "javascript:alert(1)",
                "mailto:bot@hostile.test",
                "data:text/html,<a href=/x>",
                "file:///etc/passwd",
                "gopher://127.0.0.1:70/1",
                "http://[::1/broken",
                "http://[zz::1]/",
                f"http://[::1]:{self.port}/v6-literal",
                long_path,
                "../../../../../etc/passwd",
                "/fine",
            ),
        )

    def _base(self, ex: Exchange) -> None:
        if ex.request.path == "/":
            base = f'<base href="{self.url("base", "/sub/dir/")}">'
            ex.reply(200, _page("relative", "../up", extra=base))
        else:
            ex.reply(200, b"<html>based</html>")

    def _offsite(self, ex: Exchange) -> None:
        path = ex.request.path
        if path == "/":
            ex.reply(200, _page("/to-other", "/to-outside"))
        elif path == "/to-other":
            ex.reply(302, b"", [("Location", self.url("other", "/landing"))])
        elif path == "/to-outside":
            ex.reply(302, b"", [("Location", f"http://outside.example:{self.port}/")])
        else:
            ex.reply(404, b"")

    def _schemes(self, ex: Exchange) -> None:
        path = ex.request.path
        if path == "/":
            ex.reply(200, _page("/to-file", "/to-gopher"))
        elif path == "/to-file":
            ex.reply(302, b"", [("Location", "file:///etc/passwd")])
        elif path == "/to-gopher":
            ex.reply(302, b"", [("Location", "gopher://127.0.0.1:70/1")])
        else:
            ex.reply(404, b"")

    def _empty(self, ex: Exchange) -> None:
        ex.reply(200, b"")

    def _cut_chunked(self, ex: Exchange) -> None:
        ex.keep_alive = False
        ex.head(200, [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")])
        ex.send(b"400\r\n<html>" + b"c" * 94)  # a 1024-byte chunk, 100 bytes of it, then FIN


class Servers:
    """The raw server with the hostile site, and the connect black hole."""

    def __init__(self, max_body_bytes: int) -> None:
        holder: list[HostileSite] = []
        self.blackhole = Blackhole()
        self.server = RawHttpServer(lambda ex: holder[0](ex))
        self.site = HostileSite(self.server.port, max_body_bytes, self.blackhole.port)
        holder.append(self.site)

    def close(self) -> None:
        self.server.close()
        self.blackhole.close()


def serve(max_body_bytes: int) -> Servers:
    """Start the hostile site (the caller closes it)."""
    return Servers(max_body_bytes)
