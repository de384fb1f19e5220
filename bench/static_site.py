"""A synthetic static multi-host site written to disk for nginx (``root <dir>/$host``).

Hosts are ``h0.bench`` .. ``h{n-1}.bench``; pages are ``/`` (``index.html``) and
``/p/<k>.html``, spread evenly over the hosts. Every page links to its children in a 4-ary tree
over its host's pages (so every page is reachable from its host's ``/``), then to random pages:
same-host links as root-relative, relative or absolute URLs, cross-host links as absolute URLs
with the port, some ``#fragment`` links, some links repeated on the page, and some links to
paths that answer 404 (``/p/<beyond the last page>.html``, ``/gone/<n>.html``; about 4%
as many distinct ones as pages). Each host has a
robots.txt allowing everything. The same arguments always give the same site.

Used by ``crawl_vs_scrapy.py``; pure file generation, no network.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

TREE_FANOUT = 4  #: children per page in the spanning tree
CROSS_HOST_P = 0.15  #: a random link points at another host
BROKEN_P = 0.03  #: a random link points at a 404 path
FRAGMENT_P = 0.15  #: a link gets a "#s<n>" fragment
DUPLICATE_P = 0.5  #: the page repeats one of its links (maybe in another form)
ROBOTS = b"User-agent: *\nAllow: /\n"

_WORDS = (
    "crawl frontier polite queue host robots delay fetch link page anchor graph breadth depth "
    "seed socket header body status redirect canonical fragment scheme authority path query "
    "archive record bloom filter memory budget spill refill worker lorem ipsum dolor sit amet "
    "consectetur adipiscing elit sed tempor incididunt labore magna aliqua veniam nostrud"
)


def host_name(i: int) -> str:
    return f"h{i}.bench"


def page_path(k: int) -> str:
    return "/" if k == 0 else f"/p/{k}.html"


@dataclass(slots=True)
class SiteInfo:
    """What was generated: enough to check a crawl against."""

    root: Path
    port: int
    hosts: int
    pages_per_host: list[int]
    #: (host, request URI) of every page answering 200, robots.txt excluded
    expected: set[tuple[str, str]] = field(default_factory=set)
    #: distinct (host, URI) link targets answering 404
    broken: set[tuple[str, str]] = field(default_factory=set)
    total_bytes: int = 0

    def seeds(self) -> list[str]:
        return [f"http://{host_name(i)}:{self.port}/" for i in range(self.hosts)]

    def requests_per_host(self) -> dict[str, int]:
        """Requests a complete polite crawl must make to each host: pages, 404s and robots.txt."""
        out = {host_name(i): n + 1 for i, n in enumerate(self.pages_per_host)}
        for host, _ in self.broken:
            out[host] += 1
        return out


class _Filler:
    """Cheap pseudo-text: slices of one long random paragraph."""

    def __init__(self, rnd: random.Random) -> None:
        words = _WORDS.split()
        self._text = " ".join(rnd.choice(words) for _ in range(40_000))
        self._rnd = rnd

    def take(self, n: int) -> str:
        start = self._rnd.randrange(len(self._text) - n - 1)
        return self._text[start : start + n]


def _href(rnd: random.Random, from_k: int, host: int, k: int, cur_host: int, port: int) -> str:
    """A link to page ``k`` of ``host`` written in one of the forms a crawler must resolve."""
    path = page_path(k)
    if host != cur_host:
        return f"http://{host_name(host)}:{port}{path}"
    form = rnd.random()
    if form < 0.2:
        return f"http://{host_name(host)}:{port}{path}"
    if form < 0.6 or k == 0:
        return path
    return f"{k}.html" if from_k != 0 else f"p/{k}.html"  # relative to /p/ or to /


def build_site(
    root: Path,
    port: int,
    hosts: int = 50,
    pages: int = 10_000,
    fanout: int = 20,
    page_kb: tuple[int, int] = (10, 30),
    seed: int = 1,
) -> SiteInfo:
    """Write the site under ``root/<host>/`` and return what a complete crawl must fetch."""
    if pages < hosts:
        raise ValueError(f"--pages ({pages}) must be >= --hosts ({hosts})")
    rnd = random.Random(seed)
    filler = _Filler(rnd)
    per_host = [pages // hosts + (1 if i < pages % hosts else 0) for i in range(hosts)]
    info = SiteInfo(root=root, port=port, hosts=hosts, pages_per_host=per_host)
    graph: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for h in range(hosts):
        hdir = root / host_name(h)
        (hdir / "p").mkdir(parents=True, exist_ok=True)
        (hdir / "robots.txt").write_bytes(ROBOTS)
        n = per_host[h]
        broken_pool = max(2, n // 25)  # distinct 404 targets: about 4% as many as pages
        for k in range(n):
            hrefs: list[str] = []
            targets: list[tuple[int, int]] = []
            for c in range(TREE_FANOUT * k + 1, min(TREE_FANOUT * k + TREE_FANOUT + 1, n)):
                hrefs.append(_href(rnd, k, h, c, h, port))
                targets.append((h, c))
            while len(hrefs) < fanout:
                r = rnd.random()
                if r < BROKEN_P:
                    b = rnd.randrange(broken_pool)
                    bad = f"/p/{n + b}.html" if b % 2 else f"/gone/{b}.html"
                    info.broken.add((host_name(h), bad))
                    hrefs.append(bad)
                    continue
                th = rnd.randrange(hosts) if r < BROKEN_P + CROSS_HOST_P else h
                tk = rnd.randrange(per_host[th])
                hrefs.append(_href(rnd, k, th, tk, h, port))
                targets.append((th, tk))
            hrefs = [f"{u}#s{rnd.randrange(9)}" if rnd.random() < FRAGMENT_P else u for u in hrefs]
            if hrefs and rnd.random() < DUPLICATE_P:
                hrefs.insert(rnd.randrange(len(hrefs) + 1), rnd.choice(hrefs))
            graph[(h, k)] = targets
            size = rnd.randint(page_kb[0] * 1024, page_kb[1] * 1024)
            chunk = max(1, size // (len(hrefs) + 1))
            parts = [
                f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{host_name(h)} page {k}</title></head>\n'
                f"<body><h1>Page {k} of {host_name(h)}</h1>\n"
            ]
            for i, u in enumerate(hrefs):
                parts.append(f'<p>{filler.take(chunk)} <a href="{u}">link {i}</a></p>\n')
            parts.append(f"<p>{filler.take(chunk)}</p>\n</body></html>\n")
            data = "".join(parts).encode()
            info.total_bytes += len(data)
            (hdir / ("index.html" if k == 0 else f"p/{k}.html")).write_bytes(data)
    # Every page must be reachable from the roots (the tree guarantees it; check anyway).
    todo = deque((h, 0) for h in range(hosts))
    reached = set(todo)
    while todo:
        for t in graph[todo.popleft()]:
            if t not in reached:
                reached.add(t)
                todo.append(t)
    if len(reached) != pages:
        raise AssertionError(f"site generator bug: {len(reached)} of {pages} pages reachable")
    info.expected = {(host_name(h), page_path(k)) for h, k in reached}
    return info
