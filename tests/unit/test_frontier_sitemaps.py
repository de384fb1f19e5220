"""The frontier's side of ``[sitemaps]``: robots.txt ``Sitemap:`` lines and the configured
paths queued with SITEMAP_CALLBACK through ``Frontier.add`` (scope, seen-set, robots.txt)."""

from __future__ import annotations

import shutil
from pathlib import Path

from frontier_crawl.frontier import Frontier, Ticket
from frontier_crawl.parse.sitemap import SITEMAP_CALLBACK
from tests.unit.test_frontier import A, B, make

ROBOTS = (
    b"User-agent: *\nDisallow: /private\n"
    b"Sitemap: http://a.test/index.xml.gz\n"
    b"Sitemap: /relative.xml\n"
    b"Sitemap: http://out.test/sitemap.xml\n"  # another host, not in scope
    b"Sitemap: http://b.test/sitemap-b.xml\n"  # another host, in scope
    b"Sitemap: http://a.test/private/s.xml\n"  # disallowed by robots.txt
    b"Sitemap: http://[broken\n"
)


def drain(f: Frontier, now: float) -> list[Ticket]:
    """Every ticket the frontier hands out from now on, robots.txt answered as ROBOTS, each
    ticket finished at once (hosts are spaced by 1 s: the clock moves on)."""
    out: list[Ticket] = []
    for step in range(200):
        t = now + step * 2.0
        for ticket in f.next_ready(t, 10):
            if ticket.robots:
                body = ROBOTS if ticket.origin == A else b"User-agent: *\nAllow: /\n"
                f.robots_done(ticket, t, 200, body)
            else:
                out.append(ticket)
                f.finish(ticket, t)
        if f.pending == 0 and not f.has_ready:
            break
    return out


def test_robots_sitemap_lines_and_paths_are_queued_in_scope(tmp_path: Path) -> None:
    f, rejected = make(tmp_path, obey_robots=True, sitemap_paths=("/sitemap.xml",),
                       sitemap_robots=True)  # fmt: skip
    f.add([f"{A}/page"], depth=2)
    got = drain(f, 0.0)
    sitemaps = {t.url: t for t in got if t.callback == SITEMAP_CALLBACK}
    assert set(sitemaps) == {
        f"{A}/index.xml.gz", f"{A}/relative.xml", f"{A}/sitemap.xml",
        f"{B}/sitemap-b.xml", f"{B}/sitemap.xml",  # b.test's own robots.txt: its path too
    }  # fmt: skip
    assert {t.depth for t in sitemaps.values()} == {0}
    assert {t.meta for t in sitemaps.values()} == {b""}
    assert sitemaps[f"{A}/index.xml.gz"].referrer == f"{A}/robots.txt"
    assert [t.url for t in got if t.callback != SITEMAP_CALLBACK] == [f"{A}/page"]
    assert (f"{A}/private/s.xml", "robots-denied") in rejected
    assert not any("out.test" in t.url for t in got)
    f.close()


def test_each_sitemap_once_however_often_robots_is_read(tmp_path: Path) -> None:
    f, _ = make(tmp_path, obey_robots=True, sitemap_paths=("/sitemap.xml",), sitemap_robots=True,
                robots_ttl_s=10.0)  # fmt: skip
    f.add([f"{A}/{i}" for i in range(3)], depth=0)
    got = drain(f, 0.0)
    f.add([f"{A}/later"], depth=0)  # robots.txt refreshed (TTL 10 s), its lines seen again
    got += drain(f, 1000.0)
    urls = [t.url for t in got]
    assert urls.count(f"{A}/sitemap.xml") == 1 and urls.count(f"{A}/index.xml.gz") == 1
    assert f"{A}/later" in urls
    f.close()


def test_paths_without_robots(tmp_path: Path) -> None:
    """With obey_robots off there are no Sitemap: lines; the paths are queued."""
    f, _ = make(tmp_path, obey_robots=False, sitemap_paths=("/sitemap.xml", "/news.txt"),
                sitemap_robots=True)  # fmt: skip
    f.add([f"{A}/1"], depth=0)
    got = {t.url: t.callback for t in drain(f, 0.0)}
    assert got == {f"{A}/1": "", f"{A}/sitemap.xml": SITEMAP_CALLBACK,
                   f"{A}/news.txt": SITEMAP_CALLBACK}  # fmt: skip
    f.close()


def test_cached_rules_queue_the_sitemaps(tmp_path: Path) -> None:
    f, _ = make(tmp_path, obey_robots=True, sitemap_paths=(), sitemap_robots=True)
    f.add([f"{A}/1"], depth=0)
    (robots,) = f.next_ready(0.0, 5)
    f.robots_done(robots, 0.0, 200, ROBOTS)  # cached on disk, and the sitemaps queued
    f.close()
    shutil.rmtree(tmp_path / "state" / "frontier.lmdb")  # queue and seen-set gone, the
    (tmp_path / "state" / "identity.json").unlink(missing_ok=True)  # robots.txt cache kept
    g, _ = make(tmp_path, obey_robots=True, sitemap_paths=(), sitemap_robots=True)
    g.add([f"{A}/1"], depth=0)
    first = g.next_ready(0.0, 5)
    assert [t.robots for t in first] == [False]  # fresh from the cache: no robots.txt fetch
    g.finish(first[0], 0.0)
    got = {t.url for t in first + drain(g, 1.0) if t.callback == SITEMAP_CALLBACK}
    assert f"{A}/index.xml.gz" in got and f"{B}/sitemap-b.xml" in got
    g.close()


def test_off_by_default(tmp_path: Path) -> None:
    f, _ = make(tmp_path, obey_robots=True)
    f.add([f"{A}/1"], depth=0)
    assert [t.url for t in drain(f, 0.0)] == [f"{A}/1"]
    f.close()
