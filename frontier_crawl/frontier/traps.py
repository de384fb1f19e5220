"""Crawler-trap defences as one pure function over a canonical URL.

Each limit, when hit, names the config key it comes from; that name is the outcome recorded in
the crawl log (``max-depth``, ``max-url-length``...), so an operator sees which limit to raise.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from frontier_crawl.config import CrawlSection

MAX_DEPTH = "max-depth"
MAX_URL_LENGTH = "max-url-length"
MAX_REPEATED_SEGMENTS = "max-repeated-segments"
MAX_QUERY_PARAMS = "max-query-params"
MAX_HOST_PAGES = "max-pages-per-host"


@dataclass(slots=True, frozen=True)
class Limits:
    """Trap limits (0 disables the ones that allow it)."""

    max_depth: int = 20
    max_url_length: int = 2048
    max_repeated_segments: int = 3
    max_query_params: int = 30
    max_pages_per_host: int = 0

    @classmethod
    def from_settings(cls, c: CrawlSection) -> Limits:
        return cls(
            max_depth=c.max_depth,
            max_url_length=c.max_url_length,
            max_repeated_segments=c.max_repeated_segments,
            max_query_params=c.max_query_params,
            max_pages_per_host=c.max_pages_per_host,
        )


def trap_reason(url: str, depth: int, limits: Limits) -> str | None:
    """The limit a canonical URL found at ``depth`` breaks, or None if it may be queued."""
    if depth > limits.max_depth:
        return MAX_DEPTH
    if len(url) > limits.max_url_length:
        return MAX_URL_LENGTH
    # Each test below first asks a bound computed over the whole URL by one C-level count
    # (a URL's query has no more "&" than the URL, its path no more segments than it has "/"
    # past "scheme://"); only a URL that could break the limit is split.
    max_params = limits.max_query_params
    max_repeated = limits.max_repeated_segments
    check_params = max_params and url.count("&") >= max_params
    check_segments = max_repeated and url.count("/") - 2 * ("://" in url) > max_repeated
    if not (check_params or check_segments):
        return None
    rest = url.split("://", 1)[-1]
    path, _, query = rest.partition("?")
    if check_params and query.count("&") + 1 > max_params:
        return MAX_QUERY_PARAMS
    if check_segments:
        segments = [s for s in path.split("/")[1:] if s]
        # a segment repeated more than max_repeated times leaves at most len - max_repeated
        # distinct ones (a C-level set, before the Counter)
        if len(segments) > max_repeated and len(set(segments)) <= len(segments) - max_repeated:
            _, most = Counter(segments).most_common(1)[0]
            if most > max_repeated:
                return MAX_REPEATED_SEGMENTS
    return None
