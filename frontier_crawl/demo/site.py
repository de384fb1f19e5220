"""A deterministic generated web of several virtual hosts, for the demo and the e2e tests.

``Site(SiteSpec(...))`` builds, from ``random.Random(seed)`` alone, a link graph over
``spec.hosts`` hosts named after the NATO alphabet (``alpha.demo``, ``bravo.demo``, ...;
after ``zulu.demo`` the names repeat with a number: ``alpha2.demo``). Every page is HTML with a
title, filler text and ``<a href>`` links written in all the forms a crawler must understand:

- absolute URLs, always for links to another host (``http://bravo.demo:{port}/p/3.html``);
- root-relative (``/p/3.html``), relative (``5.html``, ``../private/2.html``, ``./``) and
  ``../``-prefixed (``../p/4.html``) links;
- the same target twice on one page, in the same or another form, and ``#fragment`` links
  (``#top`` points at the page itself);
- links to paths that answer 404 (``/p/<beyond the last page>.html``, ``/gone/<n>.html``);
- ``rel="nofollow"`` links, either to a page that is reachable anyway or to a ``/trap/`` path
  that answers 404 and is linked nowhere else (a crawler that ignores nofollow requests it);
- on host 0, links to ``/private/`` pages that robots.txt disallows.

Page paths are ``/`` (the seed), ``/p/<n>.html`` and, on host 0, ``/private/<n>.html``.
Every non-private page is reachable from its host's ``/`` through a random spanning tree of
followable same-host links, built before the random extra links; every private page is linked
from at least one allowed page of host 0.

robots.txt, by host index:

- 0: ``Disallow: /private/`` for ``*`` (and ``Disallow: /`` for a group ``evil-bot`` that a
  crawler must not pick), when ``spec.disallow``; otherwise no robots.txt;
- 1: ``Crawl-delay`` for ``*`` when ``spec.crawl_delay_s`` is not None; otherwise none;
- 2 and up: odd indexes allow everything explicitly, even indexes have none (404).

The port is known only when the site is served, so links are stored with a ``{port}``
placeholder and :meth:`Site.render` fills it in; rendered bytes are cached per
``(host, path, port)``. URLs returned by the ``expected_*`` methods are canonical:
``http://{host}:{port}{path}``, lower-case host, explicit port, no fragment.
"""

from __future__ import annotations

import html
import posixpath
import random
from collections import deque
from dataclasses import dataclass

from frontier_crawl.demo.catalogue import SHOP, Catalogue

__all__ = ["Site", "SiteSpec", "host_name"]

_NATO = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliett", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
)  # fmt: skip
_TLD = "demo"
_PORT = "{port}"  #: placeholder in stored hrefs, replaced by the real port at render time
_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_ROBOTS = "/robots.txt"
_PRIVATE = "/private/"

# Per-page probabilities of the extra link kinds (added after the spanning tree).
_DUPLICATE_P = 0.5  #: one more link to a target already on the page
_SELF_FRAGMENT_P = 0.2  #: a "#top" link to the page itself
_NOFOLLOW_PAGE_P = 0.08  #: a nofollow link to a page that is reachable anyway
_NOFOLLOW_TRAP_P = 0.08  #: a nofollow link to a /trap/ path (404, linked nowhere else)
_FRAGMENT_P = 0.15  #: a link gets a "#s<n>" fragment
_SAME_HOST_BROKEN_P = 0.8  #: a broken link points at its own host (else at another host)

_WORDS = (
    "crawl", "frontier", "polite", "queue", "host", "robots", "delay", "fetch", "link",
    "page", "anchor", "graph", "breadth", "depth", "seed", "socket", "header", "body",
    "status", "redirect", "canonical", "fragment", "scheme", "authority", "path", "query",
    "archive", "record", "bloom", "filter", "memory", "budget", "spill", "refill", "worker",
    "lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed",
    "tempor", "incididunt", "labore", "magna", "aliqua", "veniam", "nostrud", "ullamco",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SiteSpec:
    """The shape of a generated web. The same spec always yields the same site."""

    hosts: int = 3  #: number of virtual hosts
    #: pages that exist (answer 200) over all hosts, each host's "/" and host 0's
    #: /private/ pages included; spread evenly, the first hosts take the remainder
    pages: int = 600
    links_per_page: int = 12  #: approximate <a> count per page (tree links + random extras)
    cross_host_ratio: float = 0.15  #: fraction of extra links that point at another host
    broken_ratio: float = 0.03  #: fraction of extra links that point at a 404 path
    seed: int = 1
    page_bytes: int = 2000  #: approximate size of the filler text of a page
    #: if above ``page_bytes``: each page's filler is drawn (log-uniformly, the same for the
    #: page on every render) between ``page_bytes`` and this, as real sites' pages vary
    page_bytes_max: int = 0
    crawl_delay_s: float | None = 0.3  #: robots.txt Crawl-delay of host 1, None for none
    disallow: bool = True  #: host 0 disallows /private/ and has a few pages there
    #: products of the shop catalogue on host 0 under /shop/ (see catalogue.py), linked from
    #: host 0's "/"; 0: no catalogue, and the site is exactly as without these three keys
    products: int = 0
    products_per_page: int = 12  #: products on one listing page
    categories: int = 5  #: categories of the catalogue (1 to 10)

    def __post_init__(self) -> None:
        if self.hosts < 1:
            raise ValueError(f"hosts: must be >= 1, got {self.hosts}")
        if self.pages < self.hosts:
            raise ValueError(f"pages: must be >= hosts ({self.hosts}), got {self.pages}")
        if self.links_per_page < 0:
            raise ValueError(f"links_per_page: must be >= 0, got {self.links_per_page}")
        if self.page_bytes < 0:
            raise ValueError(f"page_bytes: must be >= 0, got {self.page_bytes}")
        for name in ("cross_host_ratio", "broken_ratio"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: must be within [0, 1], got {value}")
        if self.cross_host_ratio + self.broken_ratio > 1.0:
            raise ValueError("cross_host_ratio + broken_ratio: must be <= 1")
        if self.products < 0:
            raise ValueError(f"products: must be >= 0, got {self.products}")
        if self.products_per_page < 1:
            raise ValueError(f"products_per_page: must be >= 1, got {self.products_per_page}")
        if not 1 <= self.categories <= 10:
            raise ValueError(f"categories: must be within [1, 10], got {self.categories}")
        if self.crawl_delay_s is not None and self.crawl_delay_s < 0:
            raise ValueError(f"crawl_delay_s: must be >= 0 or None, got {self.crawl_delay_s}")


@dataclass(frozen=True, slots=True)
class _Link:
    """One ``<a>`` of a page: where it leads and how it is written."""

    host: str  #: target host
    path: str  #: target path, no fragment
    href: str  #: as written in the page; absolute hrefs hold the "{port}" placeholder
    nofollow: bool = False


@dataclass(frozen=True, slots=True)
class _Page:
    """A page that exists: its place in the link graph and its title."""

    host: str
    path: str
    title: str
    links: tuple[_Link, ...]


@dataclass(frozen=True, slots=True)
class _Reach:
    """What a correct crawler meets, as ``(host, path)`` pairs; port-independent."""

    pages: frozenset[tuple[str, str]]  #: fetched with 200
    missing: frozenset[tuple[str, str]]  #: fetched, answered 404
    disallowed: frozenset[tuple[str, str]]  #: linked but excluded by robots.txt
    max_depth: int  #: links from a seed to the farthest fetched URL


def host_name(index: int) -> str:
    """Name of the host at ``index``: ``alpha.demo``, ..., ``zulu.demo``, ``alpha2.demo``, ..."""
    lap, letter = divmod(index, len(_NATO))
    suffix = str(lap + 1) if lap else ""
    return f"{_NATO[letter]}{suffix}.{_TLD}"


def _relative(src_path: str, dst_path: str) -> str:
    """The shortest relative reference from ``src_path`` to ``dst_path`` (both absolute)."""
    rel = posixpath.relpath(dst_path, posixpath.dirname(src_path))
    if dst_path.endswith("/"):
        rel = "./" if rel == "." else rel + "/"
    return rel


def _dotdot(src_path: str, dst_path: str) -> str:
    """A reference that climbs to the root with ``../`` and descends again (``../p/4.html``)."""
    depth = posixpath.dirname(src_path).count("/") if posixpath.dirname(src_path) != "/" else 0
    return "../" * depth + dst_path[1:]


class _Builder:
    """Draws the link graph of a site from one ``random.Random``; used once by ``Site``."""

    def __init__(self, spec: SiteSpec, hosts: list[str]) -> None:
        self.spec = spec
        self.hosts = hosts
        self.rng = random.Random(spec.seed)
        self.public: dict[str, list[str]] = {}  #: host -> allowed page paths, "/" first
        self.private: dict[str, list[str]] = {}  #: host -> /private/ page paths
        self.last_number: dict[str, int] = {}  #: host -> highest n of its /p/<n>.html
        self.links: dict[tuple[str, str], list[_Link]] = {}
        self._traps = 0

    def build(self) -> dict[str, dict[str, _Page]]:
        """Lay out the pages, then add tree links, private links and random extras."""
        self._layout()
        for host in self.hosts:
            self._spanning_tree(host)
        self._link_private_pages()
        for host, path in list(self.links):
            self._add_extras(host, path)
        return self._freeze()

    def _layout(self) -> None:
        base, extra = divmod(self.spec.pages, self.spec.hosts)
        for index, host in enumerate(self.hosts):
            count = base + (1 if index < extra else 0)
            n_private = max(1, count // 25) if index == 0 and self.spec.disallow else 0
            n_private = min(n_private, count - 1)
            n_numbered = count - 1 - n_private
            self.public[host] = ["/"] + [f"/p/{n}.html" for n in range(1, n_numbered + 1)]
            self.private[host] = [f"{_PRIVATE}{n}.html" for n in range(1, n_private + 1)]
            self.last_number[host] = n_numbered
            for path in self.public[host] + self.private[host]:
                self.links[(host, path)] = []

    def _spanning_tree(self, host: str) -> None:
        """Link each allowed page from a random earlier one, so all hang off ``/``."""
        pages = self.public[host]
        for i in range(1, len(pages)):
            parent = pages[self.rng.randrange(i)]
            self._add(host, parent, host, pages[i])

    def _link_private_pages(self) -> None:
        """Link every private page from a random allowed page of the same host."""
        for host, private in self.private.items():
            for path in private:
                self._add(host, self.rng.choice(self.public[host]), host, path)

    def _add_extras(self, host: str, path: str) -> None:
        rng = self.rng
        links = self.links[(host, path)]
        for _ in range(max(0, self.spec.links_per_page - len(links))):
            self._add(host, path, *self._extra_target(host))
        if links and rng.random() < _DUPLICATE_P:
            twin = rng.choice(links)
            href = twin.href if rng.random() < 0.5 else self._href(host, path, twin.host, twin.path)
            links.append(_Link(twin.host, twin.path, href))
        if rng.random() < _SELF_FRAGMENT_P:
            links.append(_Link(host, path, "#top"))
        if rng.random() < _NOFOLLOW_PAGE_P:
            target_host = rng.choice(self.hosts)
            target = rng.choice(self.public[target_host])
            href = self._href(host, path, target_host, target)
            links.append(_Link(target_host, target, href, nofollow=True))
        if rng.random() < _NOFOLLOW_TRAP_P:
            self._traps += 1
            trap = f"/trap/{self._traps}.html"
            links.append(_Link(host, trap, self._href(host, path, host, trap), nofollow=True))
        rng.shuffle(links)
        if path != "/":
            links.insert(0, _Link(host, "/", "/"))  # the "home" navigation link

    def _extra_target(self, host: str) -> tuple[str, str]:
        """A random target: broken, on another host, or on this host (private pages too)."""
        rng = self.rng
        others = [h for h in self.hosts if h != host]
        draw = rng.random()
        if draw < self.spec.broken_ratio:
            target_host = host
            if others and rng.random() >= _SAME_HOST_BROKEN_P:
                target_host = rng.choice(others)
            if rng.random() < 0.5:
                return target_host, f"/p/{self.last_number[target_host] + rng.randint(1, 40)}.html"
            return target_host, f"/gone/{rng.randrange(30)}.html"
        target_host = host
        if others and draw < self.spec.broken_ratio + self.spec.cross_host_ratio:
            target_host = rng.choice(others)
        return target_host, rng.choice(self.public[target_host] + self.private[target_host])

    def _add(self, host: str, path: str, target_host: str, target: str) -> None:
        href = self._href(host, path, target_host, target)
        self.links[(host, path)].append(_Link(target_host, target, href))

    def _href(self, host: str, path: str, target_host: str, target: str) -> str:
        """Write a link from ``host``+``path`` to the target in a randomly chosen form."""
        rng = self.rng
        if target_host != host:
            href = f"http://{target_host}:{_PORT}{target}"
        else:
            style = rng.randrange(4)
            if style == 0:
                href = f"http://{host}:{_PORT}{target}"
            elif style == 1:
                href = target
            elif style == 2 or posixpath.dirname(path) == "/":
                href = _relative(path, target)
            else:
                href = _dotdot(path, target)
        if rng.random() < _FRAGMENT_P:
            href += f"#s{rng.randint(1, 5)}"
        return href

    def _freeze(self) -> dict[str, dict[str, _Page]]:
        site: dict[str, dict[str, _Page]] = {host: {} for host in self.hosts}
        for (host, path), links in self.links.items():
            site[host][path] = _Page(host, path, _title(host, path), tuple(links))
        return site


def _title(host: str, path: str) -> str:
    if path == "/":
        return f"{host}: home"
    if path.startswith(_PRIVATE):
        return f"{host}: private page {path.rsplit('/', 1)[1].removesuffix('.html')}"
    return f"{host}: page {path.rsplit('/', 1)[1].removesuffix('.html')}"


def _not_found(path: str) -> bytes:
    return (
        "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>"
        f"<body><h1>Not Found</h1><p>{html.escape(path)}</p></body></html>\n"
    ).encode()


class Site:
    """A generated web: pages, robots.txt per host, and what a correct crawl of it fetches.

    Thread-safe for concurrent :meth:`render` calls (the cache is a plain dict; a race only
    renders the same bytes twice).
    """

    def __init__(self, spec: SiteSpec | None = None) -> None:
        self.spec = spec if spec is not None else SiteSpec()
        self._hosts = [host_name(i) for i in range(self.spec.hosts)]
        self._index = {host: i for i, host in enumerate(self._hosts)}
        self._pages = _Builder(self.spec, self._hosts).build()
        self._catalogue: Catalogue | None = None
        if self.spec.products:
            self._add_catalogue()
        self._reach = self._walk()
        self._cache: dict[tuple[str, str, int], tuple[int, str, bytes]] = {}

    def _add_catalogue(self) -> None:
        spec, host = self.spec, self._hosts[0]
        shop = Catalogue(host, spec.products, spec.products_per_page, spec.categories, spec.seed)
        self._catalogue = shop
        pages = self._pages[host]
        home = pages["/"]
        pages["/"] = _Page(host, "/", home.title, (*home.links, _Link(host, SHOP, SHOP)))
        for path, targets in shop.links().items():
            links = tuple(_Link(host, target, target) for target in targets)
            pages[path] = _Page(host, path, path, links)

    # -- the catalogue --------------------------------------------------------------------------

    def products(self, port: int) -> list[dict[str, object]]:
        """Ground truth of the catalogue (empty without one): a dict per product, by number.

        Keys: ``url`` (canonical), ``name``, ``price`` (float, None when sold out), ``sku``,
        ``category``, ``tags`` (list), ``description`` (its text, whitespace collapsed) and
        ``listing`` (the URL of the listing page that lists it).
        """
        return [] if self._catalogue is None else self._catalogue.truth(port)

    def listing_pages(self, port: int) -> list[str]:
        """URLs of the catalogue's listing pages (every page of every category)."""
        if self._catalogue is None:
            return []
        return [self._url(self._hosts[0], path, port) for path in self._catalogue.listings()]

    def shop_url(self, port: int) -> str:
        """The catalogue's index, ``http://alpha.demo:{port}/shop/`` (404 without one)."""
        return self._url(self._hosts[0], SHOP, port)

    # -- hosts and robots.txt -------------------------------------------------------------------

    @property
    def hosts(self) -> list[str]:
        """Host names, host 0 first."""
        return list(self._hosts)

    def seeds(self, port: int) -> list[str]:
        """The start URLs: every host's ``/``."""
        return [f"http://{host}:{port}/" for host in self._hosts]

    def resolve_entries(self, port: int) -> list[str]:
        """curl ``--resolve`` style entries pointing every host at 127.0.0.1."""
        return [f"{host}:{port}:127.0.0.1" for host in self._hosts]

    def robots_txt(self, host: str) -> str | None:
        """The robots.txt of ``host``, or None when it has none (the server answers 404)."""
        index = self._index.get(host.lower())
        if index is None:
            return None
        if index == 0 and self.spec.disallow:
            return (
                f"# robots.txt for {host}\n"
                "User-agent: evil-bot\nDisallow: /\n\n"
                f"User-agent: *\nDisallow: {_PRIVATE}\n"
            )
        if index == 1 and self.spec.crawl_delay_s is not None:
            return f"User-agent: *\nDisallow:\nCrawl-delay: {self.spec.crawl_delay_s:g}\n"
        if index >= 2 and index % 2 == 1:
            return "User-agent: *\nAllow: /\n"
        return None

    def crawl_delay(self, host: str) -> float | None:
        """The robots.txt Crawl-delay of ``host`` in seconds, None when it sets none."""
        if self._index.get(host.lower()) == 1:
            return self.spec.crawl_delay_s
        return None

    def is_disallowed(self, host: str, path: str) -> bool:
        """True when this site's robots.txt forbids ``path`` on ``host`` to every crawler."""
        return (
            self.spec.disallow and self._index.get(host.lower()) == 0 and path.startswith(_PRIVATE)
        )

    # -- serving --------------------------------------------------------------------------------

    def render(self, host: str, path: str, port: int) -> tuple[int, str, bytes]:
        """The response to ``GET path`` on ``host``: ``(status, content_type, body)``.

        ``path`` is the request target as sent (path and query); anything that is not a page or
        an existing robots.txt, or an unknown host, gives 404 with a small HTML body.
        """
        host = host.lower()
        key = (host, path, port)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        page = self._pages.get(host, {}).get(path)
        shop = self._catalogue
        if page is not None and shop is not None and host == shop.host and path.startswith(SHOP):
            response = (200, _HTML, shop.render(path, port) or b"")
        elif page is not None:
            response = (200, _HTML, self._render_page(page, port))
        elif path == _ROBOTS and (robots := self.robots_txt(host)) is not None:
            response = (200, _TEXT, robots.encode())
        else:
            return 404, _HTML, _not_found(path)  # not cached: any path may be asked
        self._cache[key] = response
        return response

    def _render_page(self, page: _Page, port: int) -> bytes:
        title = html.escape(page.title)
        parts = [
            '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">',
            f'<title>{title}</title></head>\n<body>\n<h1 id="top">{title}</h1>\n',
            *self._filler(page),
            "<ul>\n",
        ]
        port_text = str(port)
        for i, link in enumerate(page.links):
            href = html.escape(link.href.replace(_PORT, port_text), quote=True)
            rel = ' rel="nofollow"' if link.nofollow else ""
            attr = f"href='{href}'" if i % 7 == 3 else f'href="{href}"'
            text = "home" if i == 0 and link.href == "/" else f"{link.host}{link.path}"
            parts.append(f"<li><a{rel} {attr}>{html.escape(text)}</a></li>\n")
        parts.append("</ul>\n")
        if page.path == "/":
            parts.append(f'<p>Contact: <a href="mailto:webmaster@{page.host}">webmaster</a></p>\n')
        parts.append("</body>\n</html>\n")
        return "".join(parts).encode()

    def _filler(self, page: _Page) -> list[str]:
        """About ``spec.page_bytes`` of words, the same for a page on every render."""
        rng = random.Random(f"{self.spec.seed}/{page.host}{page.path}")
        low, high = self.spec.page_bytes, self.spec.page_bytes_max
        size = round(low * (high / low) ** rng.random()) if high > low > 0 else low
        words = rng.choices(_WORDS, k=size // 7)
        return [f"<p>{' '.join(words[i : i + 60])}.</p>\n" for i in range(0, len(words), 60)]

    # -- what a correct crawl fetches -------------------------------------------------------------

    def all_pages(self, port: int) -> set[str]:
        """Every page that exists (answers 200), disallowed ones included; robots.txt excluded."""
        return {
            self._url(host, path, port) for host, pages in self._pages.items() for path in pages
        }

    def expected_pages(self, port: int) -> set[str]:
        """Pages a correct crawler fetches with status 200 (robots.txt files not included).

        Breadth-first from the seeds over followable links (``rel="nofollow"`` skipped), never
        entering a path robots.txt disallows, with no depth limit.
        """
        return {self._url(host, path, port) for host, path in self._reach.pages}

    def expected_404(self, port: int) -> set[str]:
        """Linked URLs that a correct crawler requests and gets 404 for."""
        return {self._url(host, path, port) for host, path in self._reach.missing}

    def disallowed(self, port: int) -> set[str]:
        """URLs linked from fetched pages that robots.txt forbids: they must never be requested.

        Includes every ``/private/`` page (each is linked from an allowed page).
        """
        return {self._url(host, path, port) for host, path in self._reach.disallowed}

    def max_depth(self) -> int:
        """Fewest links from a seed to the farthest URL of the expected crawl (seeds are 0)."""
        return self._reach.max_depth

    @staticmethod
    def _url(host: str, path: str, port: int) -> str:
        return f"http://{host}:{port}{path}"

    def _walk(self) -> _Reach:
        """Breadth-first crawl of the link graph, as a correct crawler would do it."""
        depth = {(host, "/"): 0 for host in self._hosts}
        queue = deque(depth)
        pages: set[tuple[str, str]] = set()
        missing: set[tuple[str, str]] = set()
        disallowed: set[tuple[str, str]] = set()
        while queue:
            key = queue.popleft()
            host, path = key
            if self.is_disallowed(host, path):
                disallowed.add(key)
                continue
            page = self._pages[host].get(path)
            if page is None:
                missing.add(key)
                continue
            pages.add(key)
            for link in page.links:
                target = (link.host, link.path)
                if not link.nofollow and target not in depth:
                    depth[target] = depth[key] + 1
                    queue.append(target)
        fetched = pages | missing
        return _Reach(
            frozenset(pages),
            frozenset(missing),
            frozenset(disallowed),
            max(depth[key] for key in fetched),
        )
