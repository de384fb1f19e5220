"""Parsing: link extraction from response bodies (pure functions; imports only config).

The engine talks to a :class:`Parser`, a one-method seam: a user callback that extracts links
differently (JSON APIs, sitemaps, ...) implements ``parse`` and returns :class:`PageLinks`.
:class:`LinkParser` is the default, HTML only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from frontier_crawl.parse.links import PageLinks, extract_links

if TYPE_CHECKING:
    from frontier_crawl.config import CrawlSettings

__all__ = ["LinkParser", "PageLinks", "Parser", "extract_links"]

DEFAULT_PARSE_TYPES = ("text/html", "application/xhtml+xml")


class Parser(Protocol):
    """Turns one fetched response into the links to follow."""

    def parse(self, url: str, content_type: str, body: bytes) -> PageLinks:
        """Links of the response for ``url``; ``content_type`` is the raw header value."""
        ...


@dataclass(slots=True, frozen=True)
class LinkParser:
    """HTML link extraction for media types in ``parse_types`` (compared case-insensitively).

    Other types, and a missing Content-Type, yield no links: they are archived, not parsed.
    """

    parse_types: tuple[str, ...] = DEFAULT_PARSE_TYPES

    def __post_init__(self) -> None:
        object.__setattr__(self, "parse_types", tuple(t.strip().lower() for t in self.parse_types))

    @classmethod
    def from_settings(cls, settings: CrawlSettings) -> LinkParser:
        """Build from ``[fetch] parse_types``."""
        return cls(parse_types=settings.fetch.parse_types)

    def parse(self, url: str, content_type: str, body: bytes) -> PageLinks:
        """Links of an HTML response; no links for any other media type."""
        media_type = content_type.partition(";")[0].strip().lower()
        if media_type not in self.parse_types:
            return PageLinks((), False, url)
        return extract_links(body, url, content_type)
