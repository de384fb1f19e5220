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
    FAILED = "failed"  #: transport error (kind in ``error``); a begun response: WARC-Truncated
    NOT_MODIFIED = "not-modified"  #: 304 confirmed the cached 200: links followed, WARC revisit
    ROBOTS_TXT = "robots-txt"  #: a robots.txt fetch, logged for the record, not a page
