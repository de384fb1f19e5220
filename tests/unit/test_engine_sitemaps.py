"""The loop's sitemap step (engine/sitemaps.py) over a real frontier: what a fetched sitemap
admits (depth, referrer, callback, index levels), its outcomes, and lastmods making
scheduled pages due with ``[recrawl]`` on."""

from __future__ import annotations

import gzip
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from frontier_crawl.config import CrawlSettings, parse
from frontier_crawl.engine.sitemaps import SitemapFeed
from frontier_crawl.fetch import ErrorKind, FetchRequest, FetchResult
from frontier_crawl.frontier import Frontier, Ticket
from frontier_crawl.output import Outcome
from frontier_crawl.parse.sitemap import SITEMAP_CALLBACK, level_meta
from tests.unit.test_frontier import A
from tests.unit.test_recrawl import Clock, fetch_all, recrawling
from tests.unit.test_scrapy_idioms import HEAD, host_for


def settings(**sitemaps: Any) -> CrawlSettings:
    raw: dict[str, Any] = {
        "crawl": {"seeds": [f"{A}/"]},
        "sitemaps": {"enabled": True, **sitemaps},
        "recrawl": {"enabled": True},
    }
    return parse(raw)


def result(ticket: Ticket, body: bytes, status: int = 200, **kw: Any) -> FetchResult:
    return FetchResult(
        request=FetchRequest(ticket.url, token=ticket), url=ticket.url, status=status,
        error=kw.pop("error", None), error_detail="", header_bytes=b"", headers=(),
        raw_body=body, body=body, request_bytes=b"", ip="127.0.0.1", http_version="1.1",
        started_at=0.0, finished=50.0, duration_s=0.01, **kw,
    )  # fmt: skip


def sitemap_ticket(f: Frontier, url: str, level: int = 0) -> Ticket:
    return Ticket(b"", A, url, 1, callback=SITEMAP_CALLBACK, meta=level_meta(level))


def queued(f: Frontier, now: float = 100.0) -> list[Ticket]:
    out: list[Ticket] = []
    while tickets := f.next_ready(now, 100):
        out += tickets
        for t in tickets:
            f.finish(t, now)
        now += 0.001
    return out


def test_urlset_pages_at_depth_plus_one_with_the_sitemap_as_referrer(tmp_path: Path) -> None:
    f = recrawling(tmp_path, Clock())
    feed = SitemapFeed(f, settings())
    body = gzip.compress(
        f"<urlset><url><loc>{A}/p1</loc></url><url><loc>{A}/p2</loc></url>"
        "<url><loc>http://elsewhere.test/x</loc></url></urlset>".encode()
    )
    ticket = sitemap_ticket(f, f"{A}/sitemap.xml")
    assert feed.request(ticket).keep_bytes == 50 * 1024 * 1024
    assert feed.dispose(ticket, result(ticket, body), _no_redirect) is Outcome.SITEMAP
    got = queued(f)
    assert [(t.url, t.depth, t.referrer, t.callback) for t in got] == [
        (f"{A}/p1", 2, f"{A}/sitemap.xml", ""),
        (f"{A}/p2", 2, f"{A}/sitemap.xml", ""),
    ]  # elsewhere.test: out of scope
    f.close()


def test_index_children_are_sitemaps_up_to_max_index_depth(tmp_path: Path) -> None:
    f = recrawling(tmp_path, Clock())
    feed = SitemapFeed(f, settings(max_index_depth=1))
    index = f"<sitemapindex><sitemap><loc>{A}/s1.xml</loc></sitemap></sitemapindex>".encode()
    top = sitemap_ticket(f, f"{A}/index.xml")
    assert feed.dispose(top, result(top, index), _no_redirect) is Outcome.SITEMAP
    (child,) = queued(f)
    assert (child.url, child.callback, child.meta, child.depth) == (
        f"{A}/s1.xml", SITEMAP_CALLBACK, level_meta(1), 1)  # fmt: skip
    nested = f"<sitemapindex><sitemap><loc>{A}/s2.xml</loc></sitemap></sitemapindex>".encode()
    assert feed.dispose(child, result(child, nested), _no_redirect) is Outcome.SITEMAP
    assert queued(f) == []  # level 2 > max_index_depth 1: not queued
    f.close()


def test_outcomes(tmp_path: Path) -> None:
    f = recrawling(tmp_path, Clock())
    feed = SitemapFeed(f, settings(max_bytes=4096))
    t = sitemap_ticket(f, f"{A}/s.xml")
    cases = [
        (result(t, b"nope", 404), Outcome.HTTP_ERROR),
        (result(t, b"", 304), Outcome.NOT_MODIFIED),  # a revisit's conditional request
        (result(t, b"", 0, error=ErrorKind.TIMEOUT), Outcome.FAILED),
        (result(t, b"<!DOCTYPE x><urlset/>"), Outcome.SITEMAP_INVALID),
        (result(t, b"<html>soft 404</html>"), Outcome.SITEMAP_INVALID),
        (result(t, gzip.compress(b"<urlset>" + b" " * 100_000)), Outcome.SITEMAP_TOO_LARGE),
        (result(t, b"<urlset><url><loc>", cut=True), Outcome.SITEMAP_TOO_LARGE),
        (result(t, f"{A}/text\n".encode()), Outcome.SITEMAP),
    ]
    for r, outcome in cases:
        assert feed.dispose(t, r, _no_redirect) is outcome, r.body[:30]
    f.close()


def test_redirect_goes_back_through_the_engine(tmp_path: Path) -> None:
    f = recrawling(tmp_path, Clock())
    feed = SitemapFeed(f, settings())
    t = sitemap_ticket(f, f"{A}/s.xml")
    r = result(t, b"", 301)
    r = replace(r, headers=(("location", "/moved.xml"),))
    seen: list[str] = []

    def redirect(ticket: Ticket, res: FetchResult) -> Outcome:
        seen.append(res.url)
        return Outcome.REDIRECT

    assert feed.dispose(t, r, redirect) is Outcome.REDIRECT and seen == [f"{A}/s.xml"]
    f.close()


def test_lastmod_newer_than_the_last_capture_makes_a_page_due(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    f.add([f"{A}/old", f"{A}/fresh"], depth=0)
    fetch_all(f, 0.0, clock)  # first visits, due again in 100 s
    iso = "%Y-%m-%dT%H:%M:%SZ"
    newer = time.strftime(iso, time.gmtime(clock.now + 30))
    older = time.strftime(iso, time.gmtime(clock.now - 30))
    body = (
        f"<urlset><url><loc>{A}/old</loc><lastmod>{newer}</lastmod></url>"
        f"<url><loc>{A}/fresh</loc><lastmod>{older}</lastmod></url></urlset>"
    ).encode()
    feed = SitemapFeed(f, settings())
    t = sitemap_ticket(f, f"{A}/sitemap.xml")
    assert feed.dispose(t, result(t, body), _no_redirect) is Outcome.SITEMAP
    assert feed.made_due == 1
    clock.now += 1.0  # long before the 100 s interval
    got = fetch_all(f, 10.0, clock)
    assert [t.url for t in got] == [f"{A}/old"] and got[0].last is not None
    f.close()


def test_without_recrawl_no_lastmod_is_looked_at(tmp_path: Path) -> None:
    clock = Clock()
    f = recrawling(tmp_path, clock)
    raw = {"crawl": {"seeds": [f"{A}/"]}, "sitemaps": {"enabled": True}}
    feed = SitemapFeed(f, parse(raw))
    t = sitemap_ticket(f, f"{A}/sitemap.xml")
    body = f"<urlset><url><loc>{A}/x</loc><lastmod>2999-01-01</lastmod></url></urlset>"
    assert feed.dispose(t, result(t, body.encode()), _no_redirect) is Outcome.SITEMAP
    assert feed.made_due == 0
    f.close()


def _no_redirect(ticket: Ticket, r: FetchResult) -> Outcome:
    raise AssertionError("no redirect expected")


def test_a_spider_crawl_resumes_with_sitemaps_queued(tmp_path: Path) -> None:
    """Sitemap tickets in the queue name the crawl's own callback (NUL first), which no
    spider has: the start-up check of stored callback names must not refuse them."""
    host = host_for(tmp_path, HEAD + "class S(scrapy.Spider):\n    pass\n")
    host.check_stored(None, lambda: {SITEMAP_CALLBACK: 3, "": 2})
    assert not host.names_changed
