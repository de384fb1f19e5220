"""frontier/sitemapqueue.py on its own: which sitemap URLs a host's robots.txt queues."""

from __future__ import annotations

from collections.abc import Iterable

from frontier_crawl.config.settings import SITEMAP_CALLBACK
from frontier_crawl.frontier.hosts import HostQueue
from frontier_crawl.frontier.robots import Rules
from frontier_crawl.frontier.sitemapqueue import SitemapQueue

ROBOTS = (b"User-agent: *\nDisallow:\nSitemap: /maps/a.xml\nSitemap: https://cdn.test/b.xml\n"
          b"Sitemap: http://[bad/c.xml\n")  # fmt: skip


class Added:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str | None, str]] = []

    def __call__(self, urls: Iterable[str], *, depth: int, referrer: str | None = None,
                 now: float = 0.0, callback: str = "") -> int:  # fmt: skip
        assert depth == 0
        self.calls.append((list(urls), referrer, callback))
        return 0


def test_robots_lines_then_the_paths_are_admitted_as_sitemaps() -> None:
    added = Added()
    queue = SitemapQueue(("/sitemap.xml",), True, added)
    host = HostQueue("http://a.test")
    queue.queue(host, Rules("frontier-crawl", ROBOTS), 0.0)
    robots_url = "http://a.test/robots.txt"
    assert added.calls == [
        (["http://a.test/maps/a.xml", "https://cdn.test/b.xml"], robots_url, SITEMAP_CALLBACK),
        (["http://a.test/sitemap.xml"], None, SITEMAP_CALLBACK),
    ]


def test_cached_rules_queue_them_later_and_only_what_is_enabled() -> None:
    added = Added()
    queue = SitemapQueue((), True, added)
    host = HostQueue("http://a.test")
    host.rules = Rules("frontier-crawl", ROBOTS)
    queue.later(host)
    assert added.calls == []
    queue.queue_due(0.0)
    queue.queue_due(0.0)  # once
    assert [urls for urls, _r, _c in added.calls] == [["http://a.test/maps/a.xml",
                                                       "https://cdn.test/b.xml"]]  # fmt: skip
    assert not SitemapQueue((), False, added).enabled
