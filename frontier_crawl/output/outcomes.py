"""The per-URL outcome vocabulary of the crawl log and the report.

Every URL the engine finishes with is logged once with exactly one ``Outcome``; the value is
what the JSONL log shows. Transport failures carry the fetcher's error kind (``timeout``,
``dns-error``, ...) in the log entry's ``error`` field.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """How the engine finished with one URL."""

    FETCHED = "fetched"  #: 2xx response, archived
    HTTP_ERROR = "http-error"  #: final 4xx/5xx response, archived
    REDIRECT = "redirect"  #: 3xx whose target went back to the frontier
    TOO_MANY_REDIRECTS = "too-many-redirects"  #: the redirect chain exceeded max_redirects
    ROBOTS_DENIED = "robots-denied"  #: robots.txt disallows the URL; never requested
    ROBOTS_UNAVAILABLE = "robots-unavailable"  #: robots.txt kept failing; host retired
    #: the host's address is refused by the address policy (fetch.allow_addresses): never
    #: connected to, never retried; the host is retired (its URLs get this outcome too)
    ADDRESS_REFUSED = "address-refused"
    FAILED = "failed"  #: transport error (kind in ``error``); a begun response: WARC-Truncated
    #: a 304 confirmed the cached 200 (``fetch.cache``) or the last capture (a revisit, its
    #: request conditional): WARC revisit record, profile server-not-modified
    NOT_MODIFIED = "not-modified"
    #: a 2xx revisit whose payload has the last capture's SHA-1: WARC revisit record, profile
    #: identical-payload-digest (a changed page is ``fetched`` again)
    UNCHANGED = "unchanged"
    ROBOTS_TXT = "robots-txt"  #: a robots.txt fetch, logged for the record, not a page
    # a spider's problems with a page: one extra line each, beside the page's own line (its
    # message and code location in ``message`` and ``where``); the crawl goes on
    CALLBACK_ERROR = "callback-error"  #: the callback raised (what it yielded before is kept)
    PIPELINE_ERROR = "pipeline-error"  #: a pipeline raised or returned a non-item: item dropped
    BAD_YIELD = "bad-yield"  #: the callback yielded something that is no Request and no item
    BAD_META = "bad-meta"  #: a Request's meta is not a dict that msgpack serialises
    UNKNOWN_CALLBACK = "unknown-callback"  #: a Request (or a stored URL) names no callback
    BAD_URL = "bad-url"  #: a Request's URL does not parse or is not http(s)
    # a 2xx sitemap ([sitemaps]): its URLs went to the frontier, it is not a page itself
    SITEMAP = "sitemap"  #: read whole
    SITEMAP_TOO_LARGE = "sitemap-too-large"  #: past max_bytes or max_urls: the URLs before kept
    SITEMAP_INVALID = "sitemap-invalid"  #: not a sitemap (bad XML or gzip, a DTD, other root)
    #: a parser raised on the response (its body or a header): the URL is done, its WARC
    #: records kept, nothing of it followed; the exception's type in ``error``, its text and
    #: code location in ``message``. A defect of the crawler's, reported rather than fatal
    PARSE_ERROR = "parse-error"


#: the outcomes of a spider's problems (``frontier_crawl.spider.Problem.outcome``)
SPIDER_PROBLEMS = frozenset(
    {
        Outcome.CALLBACK_ERROR,
        Outcome.PIPELINE_ERROR,
        Outcome.BAD_YIELD,
        Outcome.BAD_META,
        Outcome.UNKNOWN_CALLBACK,
        Outcome.BAD_URL,
    }
)
