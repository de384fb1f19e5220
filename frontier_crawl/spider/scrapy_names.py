"""Scrapy's names frontier-crawl does not have, and what to use instead: the message of the
AttributeError a spider written for Scrapy meets at its import (``frontier_crawl.__getattr__``),
so nothing of Scrapy's API is missing quietly."""

from __future__ import annotations

__all__ = ["INSTEAD", "NotSupported", "missing"]


class NotSupported(ImportError):
    """A name of Scrapy's API frontier-crawl does not have. An ImportError, not an
    AttributeError: ``from frontier_crawl import CrawlSpider`` then shows this message
    instead of Python's generic "cannot import name"."""

#: Scrapy's top-level (and common) names -> what to use here
INSTEAD = {
    "CrawlSpider": "a Spider whose parse() yields response.follow_all(css=...) for the links "
    "to follow, or crawl.toml [[extract]] rules for items without code",
    "Rule": "response.follow_all(css=..., callback=...) in a callback",
    "LinkExtractor": "response.links (the page's links, canonical and in scope) or "
    "response.css('a::attr(href)')",
    "SitemapSpider": "crawl.toml [sitemaps] enabled = true (sitemaps from robots.txt and "
    "sitemaps.paths)",
    "XMLFeedSpider": "a Spider parsing response.xpath(...) in parse()",
    "CSVFeedSpider": "a Spider parsing response.text with the csv module in parse()",
    "ItemLoader": "build a dict (or an Item) in the callback",
    "signals": "Spider.open() / Spider.close() and a pipeline's open_spider/close_spider",
    "HtmlResponse": "frontier_crawl.Response (the response a callback is given)",
    "TextResponse": "frontier_crawl.Response (the response a callback is given)",
    "XmlResponse": "frontier_crawl.Response (the response a callback is given)",
    "crawler": "crawl.toml and frontier-crawl --config (there is no CrawlerProcess)",
    "CrawlerProcess": "frontier-crawl --config crawl.toml",
    "CrawlerRunner": "frontier-crawl --config crawl.toml",
    "settings": "crawl.toml keys (custom_settings maps Scrapy's names: README, Coming from "
    "Scrapy)",
    "http": "frontier_crawl.Request, FormRequest, JsonRequest and Response",
    "exceptions": "frontier_crawl.exceptions (DropItem, NotConfigured, IgnoreRequest, "
    "CloseSpider)",
}


def missing(name: str, module: str) -> str:
    """The AttributeError message for ``module.name``."""
    instead = INSTEAD.get(name)
    if instead is None:
        return f"module {module!r} has no attribute {name!r}"
    return f"{module}.{name} (Scrapy's) is not supported: use {instead}"
