"""Crawl configuration: TOML -> frozen, typed settings (leaf package)."""

from frontier_crawl.config.loader import ConfigError, load, parse, to_toml
from frontier_crawl.config.redact import redact_url, scrub
from frontier_crawl.config.settings import (
    CrawlSection,
    CrawlSettings,
    FetchSection,
    FrontierSection,
    OutputSection,
    PolitenessSection,
    ScopeSection,
    SitemapsSection,
    SpiderSection,
    WorkersSection,
)

__all__ = [
    "ConfigError",
    "CrawlSection",
    "CrawlSettings",
    "FetchSection",
    "FrontierSection",
    "OutputSection",
    "PolitenessSection",
    "ScopeSection",
    "SitemapsSection",
    "SpiderSection",
    "WorkersSection",
    "load",
    "parse",
    "redact_url",
    "scrub",
    "to_toml",
]
