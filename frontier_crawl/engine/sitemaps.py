"""The loop's sitemap step (``[sitemaps]``): a fetched sitemap's URLs to the frontier.

The frontier queues sitemaps (robots.txt ``Sitemap:`` lines, ``[sitemaps] paths``) with
callback ``SITEMAP_CALLBACK``; their responses come here from ``Engine._dispose``, never to
the HTML parser or a spider callback. A 2xx body is read by ``parse.sitemap.parse_sitemap``:

* a ``urlset`` (or text sitemap): its ``<loc>`` URLs are admitted through ``Frontier.add`` at
  the sitemap's depth + 1 with the sitemap as referrer (scope, seen-set, traps, robots.txt and
  politeness apply as to any link; a spider's default callback gets the pages); with
  ``[recrawl]`` on, its ``(<loc>, <lastmod>)`` pairs go to ``Frontier.revisits.sitemap_lastmod``: a
  scheduled page whose last capture is older than its lastmod is due now (a sitemap is itself
  revisited on its own schedule, so a changed lastmod is seen at the sitemap's next visit);
* a ``sitemapindex``: its children are admitted as sitemaps (``SITEMAP_CALLBACK``) at the same
  depth (nesting is bounded by ``max_index_depth``, not by ``crawl.max_depth``), their level
  in ``meta``; children of an index at ``max_index_depth`` are not queued (logged once).

The crawl-log outcome is ``sitemap``, ``sitemap-too-large`` or ``sitemap-invalid`` (the
parser's precise problem, such as ``dtd`` or ``bad-gzip``, goes to the log at warning level);
a sitemap's WARC records are written as for any fetch, before this step. A sitemap that is
no 2xx is recorded as a page would be (``failed``, ``http-error``, a redirect followed with
its callback, hence still as a sitemap). A parser that raises (a defect, not a kind of
sitemap) makes the outcome ``parse-error`` (``engine/poison.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from frontier_crawl.config import CrawlSettings
from frontier_crawl.engine.poison import read
from frontier_crawl.fetch import FetchRequest, FetchResult
from frontier_crawl.frontier import Ticket
from frontier_crawl.frontier.faces import SitemapTarget
from frontier_crawl.output import Outcome
from frontier_crawl.parse.sitemap import (
    SITEMAP_CALLBACK as SITEMAP_CALLBACK,  # (re-exported for the loop)
)
from frontier_crawl.parse.sitemap import (
    Kind,
    Problem,
    SitemapLimits,
    level_meta,
    meta_level,
    parse_sitemap,
)

log = logging.getLogger(__name__)

_OUTCOMES = {
    None: Outcome.SITEMAP,
    Problem.TOO_LARGE: Outcome.SITEMAP_TOO_LARGE,
    Problem.TOO_MANY_URLS: Outcome.SITEMAP_TOO_LARGE,
}


class SitemapFeed:
    """Reads fetched sitemaps into the frontier (one per engine)."""

    __slots__ = ("_frontier", "_limits", "_max_level", "_recrawl", "_warned_depth", "made_due")

    def __init__(self, frontier: SitemapTarget, settings: CrawlSettings) -> None:
        self._frontier = frontier
        self._limits = SitemapLimits.from_settings(settings)
        self._max_level = settings.sitemaps.max_index_depth
        self._recrawl = settings.recrawl.enabled  #: lastmods to the schedule
        self._warned_depth = False
        self.made_due = 0  #: scheduled URLs a sitemap's lastmod made due (this run)

    def request(self, ticket: Ticket, headers: tuple[tuple[str, str], ...] = ()) -> FetchRequest:
        """A sitemap's request: its body kept up to ``max_bytes`` (decoded), whatever the
        page cap, and cut there (the parser then says ``too-large``). ``headers``: extra
        request headers (a revisit's validators)."""
        return FetchRequest(
            ticket.url, token=ticket, headers=headers, keep_bytes=self._limits.max_bytes
        )

    def dispose(
        self, ticket: Ticket, r: FetchResult, redirect: Callable[[Ticket, FetchResult], Outcome]
    ) -> Outcome:
        """The outcome of a sitemap's final result, its URLs admitted if it has any."""
        if r.error is not None:
            return Outcome.FAILED
        if 300 <= r.status < 400 and r.header("location") and r.not_modified is None:
            return redirect(ticket, r)  # the target keeps the callback: read as a sitemap
        if r.status == 304 and r.not_modified is None:  # a conditional revisit: nothing new
            return Outcome.NOT_MODIFIED  # (its URLs were admitted at the last visit)
        if not (200 <= r.status < 300 or r.not_modified is not None):
            return Outcome.HTTP_ERROR if r.status >= 400 else Outcome.REDIRECT
        return self.feed(ticket, r)

    def feed(self, ticket: Ticket, r: FetchResult) -> Outcome:
        """Read a 2xx sitemap body and admit what it lists."""
        sitemap = read(parse_sitemap, r.body, self._limits, truncated=r.cut)
        if sitemap.problem is not None:  # (an HTML page at /sitemap.xml is common: info)
            level = logging.INFO if sitemap.problem is Problem.NOT_A_SITEMAP else logging.WARNING
            log.log(level, "sitemap %s: %s after %d bytes (%d URLs kept)", r.url,
                    sitemap.problem.value, sitemap.read_bytes, len(sitemap.entries))  # fmt: skip
        locs = [entry[0] for entry in sitemap.entries]
        if sitemap.kind is Kind.INDEX:
            level = meta_level(ticket.meta) + 1
            if level <= self._max_level:
                self._frontier.add(locs, depth=ticket.depth, referrer=ticket.url, now=r.finished,
                                   callback=SITEMAP_CALLBACK, meta=level_meta(level))  # fmt: skip
            elif locs and not self._warned_depth:
                self._warned_depth = True
                log.warning("sitemap index %s is nested %d deep: its sitemaps are not read "
                            "(sitemaps.max_index_depth = %d)", r.url, level - 1,
                            self._max_level)  # fmt: skip
        elif locs:
            self._frontier.add(locs, depth=ticket.depth + 1, referrer=ticket.url, now=r.finished)
            if self._recrawl:  # a page whose lastmod is newer than its last capture: due now
                dated = [(loc, when) for loc, when in sitemap.entries if when is not None]
                if dated:
                    self.made_due += self._frontier.revisits.sitemap_lastmod(dated)
        return _OUTCOMES.get(sitemap.problem, Outcome.SITEMAP_INVALID)
