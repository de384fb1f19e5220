"""``[sitemaps]``: each host's sitemaps queued once its robots.txt is known.

They are admitted like any URL (scope, so a ``Sitemap:`` line naming another host counts only
if that host is in scope; the seen-set, so each is fetched once however often its robots.txt is
read; robots.txt; politeness), with callback ``SITEMAP_CALLBACK`` at depth 0: the ``Sitemap:``
lines of robots.txt (relative ones resolved against it), then the configured paths. Rules
fetched now queue them at once (:meth:`SitemapQueue.queue`); rules read from the disk cache
while ``next_ready`` hands out tickets queue them once it is done with the hosts
(:meth:`SitemapQueue.later`, :meth:`SitemapQueue.queue_due`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urljoin

from frontier_crawl.config.settings import SITEMAP_CALLBACK

if TYPE_CHECKING:
    from frontier_crawl.frontier.hosts import HostQueue
    from frontier_crawl.frontier.robots import Rules


class AddUrls(Protocol):
    """``Frontier.add``, as far as sitemaps use it."""

    def __call__(
        self,
        urls: Iterable[str],
        *,
        depth: int,
        referrer: str | None = None,
        now: float = 0.0,
        callback: str = "",
    ) -> int: ...


def resolved(base: str, url: str) -> str:
    """``url`` resolved against ``base`` ("" for one that does not parse)."""
    try:
        return urljoin(base, url)
    except ValueError:
        return ""


class SitemapQueue:
    """The sitemaps of each host (see the module); ``add`` admits URLs (``Frontier.add``)."""

    __slots__ = ("_add", "_due", "enabled", "paths", "robots")

    def __init__(self, paths: tuple[str, ...], robots: bool, add: AddUrls) -> None:
        self.paths = paths  #: queued on every host ("/sitemap.xml"...)
        self.robots = robots  #: the ``Sitemap:`` lines of robots.txt too
        self.enabled = bool(paths) or robots
        self._add = add
        self._due: list[HostQueue] = []  #: hosts whose rules came from the cache meanwhile

    def later(self, host: HostQueue) -> None:
        """Queue the host's sitemaps at the next :meth:`queue_due` (its rules are known)."""
        self._due.append(host)

    def queue_due(self, now: float) -> None:
        """Queue the sitemaps of the hosts :meth:`later` named."""
        due = self._due
        while due:
            host = due.pop()
            self.queue(host, host.rules, now)

    def queue(self, host: HostQueue, rules: Rules | None, now: float) -> None:
        """Admit the host's sitemaps: ``Sitemap:`` lines of ``rules``, then the paths."""
        robots_url = host.origin + "/robots.txt"
        if self.robots and rules is not None and rules.sitemaps:
            found = [url for line in rules.sitemaps if (url := resolved(robots_url, line))]
            self._add(found, depth=0, referrer=robots_url, now=now, callback=SITEMAP_CALLBACK)
        if self.paths:
            paths = [host.origin + path for path in self.paths]
            self._add(paths, depth=0, now=now, callback=SITEMAP_CALLBACK)
