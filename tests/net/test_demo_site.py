"""The demo web: the generated site (frontier_crawl.demo.site) and its server (demo.server).

The e2e tests trust ``Site.expected_*`` and the server's request log, so these tests check them
independently: a small stdlib reference crawler (html.parser, urljoin, urllib.robotparser) walks
the rendered pages, offline and over HTTP, and must meet exactly the expected sets.
"""

from __future__ import annotations

import http.client
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import pytest

from frontier_crawl.demo.server import (
    CLOCK_TOLERANCE_S,
    DemoServer,
    RequestLogEntry,
    politeness_violations,
    robots_first_violations,
)
from frontier_crawl.demo.site import Site, SiteSpec, host_name

pytestmark = pytest.mark.timeout(30)

UA = "frontier-crawl/0.1 (+https://example.org/bot)"
PORT = 8123  # for tests that never serve: URLs only need some port

SPECS = [
    SiteSpec(),
    SiteSpec(hosts=5, pages=250, seed=7, disallow=False, crawl_delay_s=None),
    SiteSpec(hosts=30, pages=95, links_per_page=0, seed=3),
    SiteSpec(hosts=2, pages=60, cross_host_ratio=0.9, broken_ratio=0.1, seed=11),
    SiteSpec(hosts=1, pages=1),
    SiteSpec(hosts=3, pages=120, seed=4, products=150, products_per_page=7),  # a catalogue
]

Getter = Callable[[str], tuple[int, bytes]]


# -- a reference crawler, stdlib only --------------------------------------------------------------


class _Anchors(HTMLParser):
    """Collects ``(href, nofollow)`` of every ``<a href>``."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        values = dict(attrs)
        href = values.get("href")
        if href is not None:
            rel = (values.get("rel") or "").lower().split()
            self.links.append((href, "nofollow" in rel))


def anchors(body: bytes) -> list[tuple[str, bool]]:
    """The ``<a href>`` links of a page, in order."""
    parser = _Anchors()
    parser.feed(body.decode())
    parser.close()
    return parser.links


def reference_crawl(seeds: list[str], get: Getter) -> tuple[set[str], set[str], set[str]]:
    """Breadth-first crawl obeying robots.txt and nofollow: (200 pages, 404 URLs, disallowed)."""
    robots: dict[str, RobotFileParser] = {}

    def allowed(url: str) -> bool:
        netloc = urlsplit(url).netloc
        if netloc not in robots:
            status, body = get(f"http://{netloc}/robots.txt")
            parser = RobotFileParser()
            parser.parse(body.decode().splitlines() if status == 200 else [])  # [] allows all
            robots[netloc] = parser
        return robots[netloc].can_fetch(UA, url)

    seen = set(seeds)
    queue = list(seeds)
    ok: set[str] = set()
    missing: set[str] = set()
    disallowed: set[str] = set()
    while queue:
        url = queue.pop(0)
        if not allowed(url):
            disallowed.add(url)
            continue
        status, body = get(url)
        if status != 200:
            assert status == 404, url
            missing.add(url)
            continue
        ok.add(url)
        for href, nofollow in anchors(body):
            target = urldefrag(urljoin(url, href)).url
            if nofollow or not target.startswith("http://") or target in seen:
                continue
            seen.add(target)
            queue.append(target)
    return ok, missing, disallowed


def offline_getter(site: Site, port: int) -> Getter:
    """Fetch through ``Site.render`` directly, no sockets."""

    def get(url: str) -> tuple[int, bytes]:
        parts = urlsplit(url)
        assert parts.port == port, url
        status, _, body = site.render(parts.hostname or "", parts.path, port)
        return status, body

    return get


def http_get(
    conn: http.client.HTTPConnection, host: str, path: str
) -> tuple[int, http.client.HTTPResponse, bytes]:
    """GET ``path`` with ``Host: host`` on an open connection; reads the whole body."""
    conn.request("GET", path, headers={"Host": host, "User-Agent": UA})
    response = conn.getresponse()
    return response.status, response, response.read()


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site() -> Site:
    return Site(SiteSpec())


@pytest.fixture
def server(site: Site) -> Iterator[DemoServer]:
    demo = DemoServer(site)
    demo.start()
    try:
        yield demo
    finally:
        demo.stop()


@pytest.fixture
def conn(server: DemoServer) -> Iterator[http.client.HTTPConnection]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        yield connection
    finally:
        connection.close()


# -- the site --------------------------------------------------------------------------------------


def _all_bodies(site: Site, port: int) -> dict[str, bytes]:
    get = offline_getter(site, port)
    return {url: get(url)[1] for url in sorted(site.all_pages(port))}


def test_site_is_deterministic_for_a_seed() -> None:
    first, second = Site(SiteSpec()), Site(SiteSpec())
    assert first.hosts == second.hosts
    assert _all_bodies(first, PORT) == _all_bodies(second, PORT)
    for make in (Site.expected_pages, Site.expected_404, Site.disallowed):
        assert make(first, PORT) == make(second, PORT)
    other = Site(SiteSpec(seed=2))
    assert other.all_pages(PORT) == first.all_pages(PORT)  # same layout...
    assert _all_bodies(other, PORT) != _all_bodies(first, PORT)  # ...other links


def test_default_spec_size() -> None:
    site = Site()
    assert site.hosts == ["alpha.demo", "bravo.demo", "charlie.demo"]
    assert len(site.all_pages(PORT)) == 600
    expected = site.expected_pages(PORT)
    assert len(expected) >= 500
    assert {urlsplit(url).hostname for url in expected} == set(site.hosts)
    assert site.expected_404(PORT)
    assert site.disallowed(PORT)
    assert site.max_depth() <= 10  # a crawler's default max_depth (20) reaches everything


@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_every_page_is_reachable(spec: SiteSpec) -> None:
    site = Site(spec)
    everything = site.all_pages(PORT)
    expected = site.expected_pages(PORT)
    private = {url for url in everything if "/private/" in url}
    assert expected == everything - private
    assert private <= site.disallowed(PORT)
    host0_pages = -(-spec.pages // spec.hosts)  # host 0 takes a share of the remainder
    assert bool(private) == (spec.disallow and host0_pages >= 2)
    assert set(site.seeds(PORT)) <= expected
    assert not expected & site.expected_404(PORT)
    assert not site.disallowed(PORT) & (expected | site.expected_404(PORT))
    assert all(site.render(urlsplit(u).hostname or "", urlsplit(u).path, PORT)[0] == 404
               for u in site.expected_404(PORT))  # fmt: skip


@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_rendered_html_matches_the_expected_sets(spec: SiteSpec) -> None:
    """What the pages say (parsed as a crawler would) is what the model predicts."""
    site = Site(spec)
    ok, missing, disallowed = reference_crawl(site.seeds(PORT), offline_getter(site, PORT))
    assert ok == site.expected_pages(PORT)
    assert missing == site.expected_404(PORT)
    assert disallowed == site.disallowed(PORT)


def test_links_come_in_every_form(site: Site) -> None:
    hrefs: list[str] = []
    nofollow: list[str] = []
    duplicates = 0
    for url, body in _all_bodies(site, PORT).items():
        links = anchors(body)
        hrefs += [href for href, _ in links]
        nofollow += [urldefrag(urljoin(url, href)).url for href, nf in links if nf]
        targets = [urldefrag(urljoin(url, href)).url for href, _ in links]
        duplicates += len(targets) != len(set(targets))
    host = site.hosts[0]
    assert any(h.startswith(f"http://{site.hosts[1]}:{PORT}/") for h in hrefs)  # absolute
    assert any(h.startswith(f"http://{host}:{PORT}/") for h in hrefs)  # absolute, same host
    assert any(h.startswith("/p/") for h in hrefs)  # root-relative
    assert any(h.startswith("../p/") for h in hrefs)
    assert any(h[0].isdigit() and h.endswith(".html") for h in hrefs)  # "5.html"
    assert any("#s" in h for h in hrefs) and "#top" in hrefs
    assert any(h.startswith("mailto:") for h in hrefs)
    assert duplicates > 100
    expected = site.expected_pages(PORT)
    traps = [u for u in nofollow if "/trap/" in u]
    assert traps and not set(traps) & (expected | site.expected_404(PORT))
    assert any(u in expected for u in nofollow)  # nofollow to a page reachable anyway
    assert len(hrefs) / len(site.all_pages(PORT)) == pytest.approx(14, abs=2)


def test_robots_and_crawl_delay(site: Site) -> None:
    alpha, bravo, charlie = site.hosts
    assert "Disallow: /private/" in (site.robots_txt(alpha) or "")
    assert "Crawl-delay: 0.3" in (site.robots_txt(bravo) or "")
    assert site.robots_txt(charlie) is None
    assert site.crawl_delay(bravo) == 0.3
    assert site.crawl_delay(alpha) is None and site.crawl_delay(charlie) is None
    assert site.is_disallowed(alpha, "/private/1.html")
    assert not site.is_disallowed(bravo, "/private/1.html")
    plain = Site(SiteSpec(disallow=False, crawl_delay_s=None))
    assert plain.robots_txt(alpha) is None and plain.robots_txt(bravo) is None
    assert plain.crawl_delay(bravo) is None


def test_names_seeds_and_resolve_entries(site: Site) -> None:
    assert [host_name(i) for i in (0, 9, 23, 25, 26, 53)] == [
        "alpha.demo", "juliett.demo", "xray.demo", "zulu.demo", "alpha2.demo", "bravo3.demo",
    ]  # fmt: skip
    assert site.seeds(80) == [f"http://{h}:80/" for h in site.hosts]
    assert site.resolve_entries(80) == [f"{h}:80:127.0.0.1" for h in site.hosts]


@pytest.mark.parametrize(
    "bad",
    [
        {"hosts": 0},
        {"pages": 2},
        {"links_per_page": -1},
        {"broken_ratio": 1.5},
        {"cross_host_ratio": 0.6, "broken_ratio": 0.6},
        {"crawl_delay_s": -1.0},
    ],
)
def test_spec_rejects_bad_values(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SiteSpec(**bad)  # type: ignore[arg-type]


# -- the server ------------------------------------------------------------------------------------


def test_serves_pages_by_host_header(
    server: DemoServer, conn: http.client.HTTPConnection, site: Site
) -> None:
    alpha, bravo, _ = site.hosts
    status, response, body = http_get(conn, f"{alpha}:{server.port}", "/")
    assert status == 200
    assert response.getheader("Content-Type") == "text/html; charset=utf-8"
    assert int(response.getheader("Content-Length") or -1) == len(body)
    assert b"<title>alpha.demo: home</title>" in body
    status, _, body = http_get(conn, bravo, "/p/3.html")  # no port in Host
    assert status == 200 and b"<title>bravo.demo: page 3</title>" in body
    assert f"http://{alpha}:{server.port}".encode() in http_get(conn, "ALPHA.demo:1", "/")[2]
    assert http_get(conn, alpha, "/p/100000.html")[0] == 404
    assert http_get(conn, alpha, "/p/3.html?x=1")[0] == 404
    assert http_get(conn, "nowhere.demo", "/")[0] == 404
    assert server.base_url(bravo) == f"http://bravo.demo:{server.port}"


def test_serves_robots_txt(server: DemoServer, conn: http.client.HTTPConnection) -> None:
    status, response, body = http_get(conn, "alpha.demo", "/robots.txt")
    assert status == 200 and b"Disallow: /private/" in body
    assert response.getheader("Content-Type") == "text/plain; charset=utf-8"
    status, _, body = http_get(conn, "bravo.demo", "/robots.txt")
    assert status == 200 and b"Crawl-delay: 0.3" in body
    assert http_get(conn, "charlie.demo", "/robots.txt")[0] == 404


def test_log_records_every_request(server: DemoServer, conn: http.client.HTTPConnection) -> None:
    before = time.monotonic()
    bodies = [http_get(conn, "alpha.demo", p)[2] for p in ("/", "/p/1.html", "/nope")]
    log = server.log()
    assert [(e.host, e.path, e.status) for e in log] == [
        ("alpha.demo", "/", 200),
        ("alpha.demo", "/p/1.html", 200),
        ("alpha.demo", "/nope", 404),
    ]
    assert [e.bytes for e in log] == [len(b) for b in bodies]
    assert all(before <= e.started <= e.finished <= time.monotonic() for e in log)
    assert all(a.finished <= b.started for a, b in itertools.pairwise(log))
    log.clear()
    assert len(server.log()) == 3  # log() returns a copy


def test_keep_alive(server: DemoServer, conn: http.client.HTTPConnection) -> None:
    _, first, _ = http_get(conn, "alpha.demo", "/")
    sock = conn.sock
    _, second, _ = http_get(conn, "bravo.demo", "/")
    assert not first.will_close and not second.will_close
    assert conn.sock is sock  # not reconnected
    ports = {e.client_port for e in server.log()}
    assert len(ports) == 1 and ports == {sock.getsockname()[1]}


def test_other_methods_get_405(server: DemoServer, conn: http.client.HTTPConnection) -> None:
    conn.request("POST", "/", body=b"x=1", headers={"Host": "alpha.demo"})
    response = conn.getresponse()
    response.read()
    assert response.status == 405 and response.getheader("Allow") == "GET"
    (entry,) = server.log()
    assert (entry.method, entry.status) == ("POST", 405)


def test_concurrent_clients(server: DemoServer, site: Site) -> None:
    urls = sorted(site.expected_pages(server.port))[:400]
    errors: list[str] = []

    def worker(part: list[str]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            for url in part:
                parts = urlsplit(url)
                status = http_get(connection, parts.netloc, parts.path)[0]
                if status != 200:
                    errors.append(f"{url}: {status}")
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(urls[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    log = server.log()
    assert len(log) == len(urls) and len({e.client_port for e in log}) == 8


def test_reference_crawl_over_http(server: DemoServer, site: Site) -> None:
    """A compliant crawl, checked from the server's own log, as the e2e tests will."""
    port = server.port
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def get(url: str) -> tuple[int, bytes]:
        parts = urlsplit(url)
        status, _, body = http_get(connection, parts.netloc, parts.path)
        return status, body

    try:
        ok, missing, disallowed = reference_crawl(site.seeds(port), get)
    finally:
        connection.close()
    log = server.log()
    pages = [e for e in log if e.path != "/robots.txt"]
    fetched = {f"http://{e.host}:{port}{e.path}" for e in pages if e.status == 200}
    not_found = {f"http://{e.host}:{port}{e.path}" for e in pages if e.status == 404}
    assert fetched == ok == site.expected_pages(port)
    assert not_found == missing == site.expected_404(port)
    assert disallowed == site.disallowed(port)
    assert len(pages) == len(fetched) + len(not_found)  # each URL exactly once
    assert robots_first_violations(log) == []
    assert politeness_violations(log, 0.0) == []  # one connection: never overlapping


def test_stop_is_idempotent_and_closes_kept_alive_connections(site: Site) -> None:
    demo = DemoServer(site)
    with pytest.raises(RuntimeError):
        _ = demo.port
    demo.stop()  # never started: no-op
    with demo:
        port = demo.start()  # already running: same port
        assert port == demo.port
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        assert http_get(connection, "alpha.demo", "/")[0] == 200  # connection kept open
        started = time.monotonic()
    assert time.monotonic() - started < 5
    demo.stop()
    assert demo.port == port and len(demo.log()) == 1
    with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
        http_get(connection, "alpha.demo", "/")
    connection.close()
    with pytest.raises(RuntimeError):
        demo.start()


# -- log checks ------------------------------------------------------------------------------------


def entry(host: str, path: str, started: float, finished: float) -> RequestLogEntry:
    return RequestLogEntry(host, path, 200, started, finished, 100, 50000, responding=finished)


def test_politeness_accepts_a_compliant_sequence() -> None:
    log = [
        entry("a.demo", "/robots.txt", 0.00, 0.01),
        entry("b.demo", "/", 0.02, 0.03),  # other hosts interleave freely
        entry("a.demo", "/", 0.51, 0.52),
        entry("b.demo", "/x", 0.53, 0.54),
        entry("a.demo", "/y", 1.02 - CLOCK_TOLERANCE_S / 2, 1.03),  # within the tolerance
    ]
    assert politeness_violations(log, 0.5) == []
    assert politeness_violations(list(reversed(log)), 0.5) == []  # order of the log is free


def test_politeness_detects_violations() -> None:
    log = [
        entry("a.demo", "/", 0.0, 0.1),
        entry("a.demo", "/1", 0.5, 0.6),  # 0.4 s after: too soon for 0.5
        entry("a.demo", "/2", 0.55, 0.7),  # overlaps /1
        entry("b.demo", "/", 0.0, 0.1),
        entry("b.demo", "/1", 0.5, 0.6),
    ]
    problems = politeness_violations(log, 0.5)
    assert len(problems) == 3
    assert problems[0].startswith("a.demo: GET /1 started 0.400s after GET / finished")
    (overlap,) = politeness_violations(log, 0.3, per_host_gap={"a.demo": 0.3})
    assert overlap.startswith("a.demo: GET /2 started -0.050s after GET /1 finished")
    assert len(politeness_violations(log, 0.0, per_host_gap={"b.demo": 1.0})) == 2


def test_robots_first() -> None:
    good = [entry("a.demo", "/robots.txt", 0.0, 0.1), entry("a.demo", "/", 0.2, 0.3)]
    assert robots_first_violations(good) == []
    in_flight = [entry("a.demo", "/robots.txt", 0.0, 0.1), entry("a.demo", "/", 0.05, 0.3)]
    early = [entry("b.demo", "/", 0.0, 0.1), entry("b.demo", "/robots.txt", 0.2, 0.3)]
    never = [entry("c.demo", "/", 0.0, 0.1)]
    problems = robots_first_violations(good + in_flight + early + never)
    assert [p.split(":")[0] for p in problems] == ["a.demo", "b.demo", "c.demo"]
    assert "never requested" in problems[2]
