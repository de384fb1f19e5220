"""The generated web: every host, page, link and answer is a pure function of ``(seed, hosts)``.

Host ``i`` (``0 <= i < hosts``) is named ``h<i>.test`` and has the properties of
:class:`HostInfo`, drawn from a hash of the seed and ``i``, independently of ``i``'s size:

* **pages**: a power law, ``P(pages >= x) = x ** -alpha`` (alpha 1: half the hosts have one
  or two pages, 90% under 10, one in 10^5 at the cap ``max_pages``). Page 0 is ``/``, page
  ``k > 0`` is ``/p/<k>.html``; page ``k`` links to pages ``4k+1 .. 4k+4`` (every page is
  reachable from ``/``). A query ``?ref=1`` or ``?ref=2`` on a page serves the same page.
* **kind** (how it answers): ``ok``; ``slow`` (every answer 0.5-4 s late); ``never`` (reads
  the request, never answers); ``reset`` (a third of its URLs are answered with a TCP reset);
  ``throttle`` (429 with ``Retry-After`` during a third of the seconds, by the clock).
* **dns**: ``ok`` (an A record in 198.18.0.0/15, the benchmarking network), ``nxdomain`` or
  ``timeout`` (the name server never replies).
* **robots**: ``allow`` (disallows ``/private/`` only), ``delay`` (also a Crawl-delay of 2-10 s),
  ``missing`` (404), ``error`` (500 or 503), ``slow`` (an allow-all answer 3-8 s late).

A page (:meth:`Web.page`) is 10-60 KB of HTML with 40-60 links: its tree children, other pages
of its host (absolute, root-relative and relative forms, with fragments, some with a query),
the same link twice, other hosts (``/`` mostly, a random page sometimes), dead links (404),
images and PDFs, redirect chains (``/go/<n>/<k>``: ``n`` hops to page ``k``; some longer than
five), a redirect to another host (``/out/<j>``), ``/private/`` links (robots.txt disallows
them), ``mailto:`` and ``javascript:`` links.
"""

from __future__ import annotations

import random
import re
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

import xxhash

HostKind = Literal["ok", "slow", "never", "reset", "throttle"]
DnsKind = Literal["ok", "nxdomain", "timeout"]
RobotsKind = Literal["allow", "delay", "missing", "error", "slow"]

SUFFIX: Final = ".test"
_NAME = re.compile(r"h(0|[1-9][0-9]{0,8})\.test\Z")
_PAGE = re.compile(r"/p/([1-9][0-9]{0,8})\.html\Z")
_GO = re.compile(r"/go/([0-9])/(0|[1-9][0-9]{0,8})\Z")
_OUT = re.compile(r"/out/(0|[1-9][0-9]{0,8})\Z")
_ASSET = re.compile(r"/(img|files)/(0|[1-9][0-9]{0,8})\.(png|pdf)\Z")

_KEY: Final = struct.Struct("<IQQ")
#: the first address of the network host addresses are taken from (RFC 2544, 198.18.0.0/15)
NET_BASE: Final = (198 << 24) | (18 << 16)
NET_SIZE: Final = 1 << 17

_TEXT = (
    "crawl frontier archive host page link queue robots delay politeness fetch parse record "
    "the of and a to in is that for on with as by at from this be are or an it which were "
    "data index search network server client request response header body content domain "
    "library history science museum river mountain garden kitchen market station harbour"
)


@dataclass(frozen=True, slots=True)
class HostInfo:
    index: int
    pages: int
    kind: HostKind
    dns: DnsKind
    robots: RobotsKind
    crawl_delay_s: int  #: the robots.txt Crawl-delay (0 unless robots is "delay")
    slow_s: float  #: how late a slow host's answers (or a slow robots.txt) come
    address: str  #: its IPv4 address (dotted)


@dataclass(frozen=True, slots=True)
class Answer:
    """What the generator does for one request.

    ``status``: the HTTP status, or 0 for no answer (``never``) and -1 for a TCP reset."""

    status: int
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    location: str = ""
    retry_after: int = 0
    delay_s: float = 0.0


def _unit(h: int) -> float:
    """A 64-bit hash as a float in (0, 1]."""
    return ((h >> 11) + 1) / float(1 << 53)


class Web:
    """The web of ``hosts`` hosts drawn from ``seed``."""

    def __init__(self, seed: int, hosts: int, *, alpha: float = 1.0, max_pages: int = 100_000,
                 slow: float = 0.02, never: float = 0.003, reset: float = 0.01,
                 throttle: float = 0.02, nxdomain: float = 0.02, dns_timeout: float = 0.003,
                 robots_delay: float = 0.04, robots_missing: float = 0.06,
                 robots_error: float = 0.015, robots_slow: float = 0.01,
                 cross_share: float = 0.3) -> None:  # fmt: skip
        self.seed, self.hosts, self.alpha, self.max_pages = seed, hosts, alpha, max_pages
        self.kinds = ((slow, "slow"), (never, "never"), (reset, "reset"), (throttle, "throttle"))
        self.dns_kinds = ((nxdomain, "nxdomain"), (dns_timeout, "timeout"))
        self.robots_kinds = (
            (robots_delay, "delay"), (robots_missing, "missing"), (robots_error, "error"),
            (robots_slow, "slow"),
        )  # fmt: skip
        self.cross_share = cross_share
        rng = random.Random(seed)
        words_in = _TEXT.split()
        words = [rng.choice(words_in) for _ in range(24_000)]
        text = " ".join(words).encode()
        #: filler text pages are cut from (twice over, so any offset has 64 KB after it)
        self.filler = text[:65536] * 2
        self.host_info = lru_cache(maxsize=1 << 16)(self._host_info)

    # -- names ------------------------------------------------------------------------------

    @staticmethod
    def name(i: int) -> str:
        return f"h{i}{SUFFIX}"

    def index(self, name: str) -> int | None:
        """The host index of a name (any case, one trailing dot allowed), None if none."""
        m = _NAME.match(name.lower().rstrip("."))
        if m is None:
            return None
        i = int(m[1])
        return i if i < self.hosts else None

    def _hash(self, tag: int, i: int, k: int = 0) -> int:
        return xxhash.xxh3_64_intdigest(_KEY.pack(tag, i, k), seed=self.seed)

    def pages_of(self, i: int) -> int:
        """How many pages host ``i`` has."""
        return max(1, int(min(self.max_pages, _unit(self._hash(1, i)) ** (-1.0 / self.alpha))))

    @staticmethod
    def _pick(u: float, table: tuple[tuple[float, str], ...], default: str) -> str:
        for share, kind in table:
            if u < share:
                return kind
            u -= share
        return default

    def _host_info(self, i: int) -> HostInfo:
        pages = self.pages_of(i)
        h2, h3, h4 = self._hash(2, i), self._hash(3, i), self._hash(4, i)
        kind = self._pick(_unit(h2), self.kinds, "ok")
        dns = self._pick(_unit(h3), self.dns_kinds, "ok")
        robots = self._pick(_unit(h4), self.robots_kinds, "allow")
        crawl_delay = 2 + h4 % 9 if robots == "delay" else 0
        slow_s = 0.5 + (h2 % 3500) / 1000 if kind == "slow" else 3 + (h4 % 5000) / 1000
        a = NET_BASE + 1 + i % (NET_SIZE - 2)
        address = f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}"
        return HostInfo(i, pages, kind, dns, robots, crawl_delay, slow_s, address)  # type: ignore[arg-type]

    # -- answers ----------------------------------------------------------------------------

    def robots(self, info: HostInfo) -> Answer:
        allow = b"User-agent: *\nDisallow: /private/\n"
        if info.robots == "missing":
            return Answer(404, b"not found\n", "text/plain")
        if info.robots == "error":
            return Answer(500 + 3 * (info.index % 2), b"error\n", "text/plain")
        if info.robots == "delay":
            return Answer(200, allow + b"Crawl-delay: %d\n" % info.crawl_delay_s, "text/plain")
        if info.robots == "slow":
            return Answer(200, allow, "text/plain", delay_s=info.slow_s)
        return Answer(200, allow, "text/plain")

    def answer(self, host: str, target: str, now: float) -> Answer:
        """The answer to ``GET target`` (origin-form, query included) on ``host``."""
        i = self.index(host.partition(":")[0])
        if i is None:
            return Answer(404, b"no such host\n", "text/plain")
        info = self.host_info(i)
        path, _, query = target.partition("?")
        if info.kind == "never":
            return Answer(0)
        if path == "/robots.txt":
            return self.robots(info)
        delay = info.slow_s if info.kind == "slow" else 0.0
        if info.kind == "reset" and xxhash.xxh3_64_intdigest(target.encode(), seed=i ^ self.seed) % 3 == 0:
            return Answer(-1)
        if info.kind == "throttle" and self._hash(6, i, int(now)) % 3 == 0:
            return Answer(429, b"slow down\n", "text/plain", retry_after=1 + i % 4)
        answer = self._route(info, path, query)
        return Answer(answer.status, answer.body, answer.content_type, answer.location,
                      delay_s=delay) if delay else answer  # fmt: skip

    def _route(self, info: HostInfo, path: str, query: str) -> Answer:
        if query and query not in ("ref=1", "ref=2"):
            return Answer(404, b"not found\n", "text/plain")
        k = self.page_index(info, path)
        if k is not None:
            return Answer(200, self.page(info, k))
        if query:
            return Answer(404, b"not found\n", "text/plain")
        m = _GO.match(path)
        if m is not None and int(m[2]) < info.pages:
            hops, k = int(m[1]), int(m[2])
            if hops <= 1:
                return Answer(302, location=self.page_path(k))
            return Answer(301, location=f"/go/{hops - 1}/{k}")
        m = _OUT.match(path)
        if m is not None and int(m[1]) < self.hosts:
            return Answer(301, location=f"http://{self.name(int(m[1]))}/")
        m = _ASSET.match(path)
        if m is not None and int(m[2]) < self.assets(info):
            size = 2000 + self._hash(7, info.index, int(m[2])) % 18000
            kind = "image/png" if m[3] == "png" else "application/pdf"
            return Answer(200, self.filler[:size], kind)
        return Answer(404, b"<html><body>not found</body></html>\n")

    @staticmethod
    def page_path(k: int) -> str:
        return "/" if k == 0 else f"/p/{k}.html"

    @staticmethod
    def page_index(info: HostInfo, path: str) -> int | None:
        if path == "/":
            return 0
        m = _PAGE.match(path)
        if m is None:
            return None
        k = int(m[1])
        return k if k < info.pages else None

    @staticmethod
    def assets(info: HostInfo) -> int:
        return max(2, info.pages // 4)

    # -- pages ------------------------------------------------------------------------------

    def links(self, info: HostInfo, k: int) -> list[str]:
        """The hrefs of page ``k`` of a host, in page order (duplicates included)."""
        rng = random.Random(self._hash(8, info.index, k))
        origin = f"http://{self.name(info.index)}"
        pages = info.pages
        out = []
        for c in range(4 * k + 1, min(4 * k + 5, pages)):
            out.append(self._same(rng, origin, k, c))
        for _ in range(rng.randint(40, 60) - len(out)):
            r = rng.random()
            if r < self.cross_share:
                j = rng.randrange(self.hosts)
                t = 0 if rng.random() < 0.8 else rng.randrange(self.pages_of(j))
                out.append(f"http://{self.name(j)}{self.page_path(t)}")
                continue
            r = rng.random()
            if r < 0.70:
                out.append(self._same(rng, origin, k, rng.randrange(pages)))
            elif r < 0.76 and out:
                out.append(rng.choice(out))  # the same link again
            elif r < 0.80:
                out.append(f"/gone/{rng.randrange(1000)}.html")
            elif r < 0.81:
                out.append(f"http://{self.name(rng.randrange(self.hosts))}/gone.html")
            elif r < 0.86:
                a = rng.randrange(self.assets(info))
                out.append(f"/img/{a}.png" if rng.random() < 0.7 else f"/files/{a}.pdf")
            elif r < 0.89:
                hops = 1 + rng.randrange(3) if rng.random() < 0.9 else 7
                out.append(f"/go/{hops}/{rng.randrange(pages)}")
            elif r < 0.90:
                out.append(f"/out/{rng.randrange(self.hosts)}")
            elif r < 0.93:
                out.append(f"/private/{rng.randrange(100)}.html")
            elif r < 0.94:
                out.append("mailto:info@example.test" if rng.random() < 0.5 else "javascript:void(0)")
            else:
                out.append(self._same(rng, origin, k, rng.randrange(pages)) + "#s")
        return out

    def _same(self, rng: random.Random, origin: str, k: int, t: int) -> str:
        """A link from page ``k`` to page ``t`` of the same host, in one of several forms."""
        path = self.page_path(t)
        r = rng.random()
        if r < 0.3:
            href = origin + path
        elif r < 0.6 or t == 0:
            href = path
        elif k == 0:
            href = f"p/{t}.html"
        elif r < 0.9:
            href = f"{t}.html"
        else:
            href = f"../p/{t}.html"
        r = rng.random()
        if r < 0.05:
            href += f"?ref={1 + rng.randrange(2)}"
        elif r < 0.12:
            href += f"#sec{rng.randrange(5)}"
        return href

    def page(self, info: HostInfo, k: int) -> bytes:
        """Page ``k`` of a host: 10-60 KB of HTML around its links."""
        h = self._hash(9, info.index, k)
        size = 10_000 + h % 50_000
        links = self.links(info, k)
        name = self.name(info.index)
        head = (
            f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{name} page {k}"
            f"</title></head>\n<body><h1>{name} {k}</h1>\n"
        ).encode()
        parts = [head]
        chunk = max(64, (size - len(head)) // (len(links) + 1))
        offset = (h >> 20) % 65536
        filler = self.filler
        for n, href in enumerate(links):
            start = offset + n * chunk
            parts.append(b"<p>%s <a href=\"%s\">link %d</a></p>\n"
                         % (filler[start:start + chunk], href.encode(), n))  # fmt: skip
        parts.append(b"</body></html>\n")
        return b"".join(parts)
