"""What a :class:`Frontier` is built with, in two records instead of 27 parameters.

* :class:`FrontierOptions` — the frozen tunables (scope, limits, politeness, robots.txt,
  memory, the LMDB map size, retries), built from the crawl settings by
  :meth:`FrontierOptions.from_settings` (the only place that reads them) or directly in tests;
* :class:`FrontierHooks` — the frontier's collaborators: where rejected URLs are recorded, the
  worker routing of worker mode, the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frontier_crawl.frontier.completion import RetryPolicy
from frontier_crawl.frontier.politeness import DelayPolicy
from frontier_crawl.frontier.recrawl import RecrawlPolicy
from frontier_crawl.frontier.scope import ANY_PORT, PortScope, check_scope, scope_ports
from frontier_crawl.frontier.traps import Limits

if TYPE_CHECKING:
    from frontier_crawl.config import CrawlSettings
    from frontier_crawl.frontier.mailbox import Link
    from frontier_crawl.frontier.records import Ticket

#: links remembered as settled (see Frontier.add): about 150 bytes each with their strings
#: (a link string is usually shared with the parser's output, so often less)
SETTLED_LINKS = 32_768


@dataclass(slots=True, frozen=True, kw_only=True)
class FrontierOptions:
    """The frontier's tunables (``[scope]``, ``[crawl]`` limits, ``[politeness]``,
    ``[frontier]``, ``[fetch]`` retries). ``robots_token`` names our group in robots.txt
    (default: ``user_agent``'s product token); ``robots_ttl_s`` is capped at 24 hours."""

    allow_domains: tuple[str, ...] | list[str] = ()
    #: the ports in scope (``scope.scope_ports``; by default every port)
    allow_ports: PortScope = ANY_PORT
    exclude: tuple[str, ...] | list[str] = ()
    limits: Limits = field(default_factory=Limits)
    max_pages: int = 0
    policy: DelayPolicy = field(default_factory=DelayPolicy)
    connections_per_host: int = 1
    obey_robots: bool = True
    user_agent: str = "frontier-crawl"
    robots_token: str = ""
    robots_ttl_s: float = 86_400.0
    robots_retry_s: float = 60.0
    robots_attempts: int = 3
    robots_stale_s: float = 0.0
    max_host_errors: int = 3
    host_error_urls: int = 3
    memory_urls: int = 200_000
    map_size: int = 1 << 30
    per_ip: bool = False
    #: host -> address (``fetch.resolve``), with per_ip only (the IP groups are its one use)
    known_ips: Mapping[str, str] = field(default_factory=dict)
    settled_links: int = SETTLED_LINKS
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    #: ``[sitemaps]`` (enabled): paths queued as sitemaps on every host once its robots.txt
    #: is known, and whether its ``Sitemap:`` lines are too (both empty/False: off)
    sitemap_paths: tuple[str, ...] = ()
    sitemap_robots: bool = False
    recrawl: RecrawlPolicy | None = None  #: a continuous crawl's policy (None: recrawl off)

    @classmethod
    def from_settings(cls, s: CrawlSettings) -> FrontierOptions:
        """The frontier's tunables from the crawl settings (ConfigError if a scope entry
        cannot match or a seed is outside it)."""
        domains = check_scope(s)
        p = s.politeness
        known_ips = {}
        for entry in s.fetch.resolve if p.per_ip else ():  # "host:port:addr", curl --resolve
            host, _port, addr = entry.split(":", 2)
            known_ips[host.lower()] = addr.strip("[]")
        return cls(
            allow_domains=tuple(domains),
            allow_ports=scope_ports(s),
            exclude=tuple(s.scope.exclude),
            limits=Limits.from_settings(s.crawl),
            max_pages=s.crawl.max_pages,
            policy=DelayPolicy.from_settings(p),
            connections_per_host=p.connections_per_host,
            obey_robots=p.obey_robots,
            user_agent=p.user_agent,
            robots_token=p.product_token,
            robots_ttl_s=p.robots_ttl_s,
            robots_stale_s=p.robots_stale_s,
            robots_retry_s=p.robots_retry_s,
            robots_attempts=p.robots_attempts,
            max_host_errors=p.max_host_errors,
            host_error_urls=p.host_error_urls,
            memory_urls=s.frontier.memory_urls,
            map_size=s.frontier.lmdb_map_size_bytes,
            per_ip=p.per_ip,
            known_ips=known_ips,
            retry_policy=RetryPolicy.from_settings(s.fetch),
            sitemap_paths=s.sitemaps.paths if s.sitemaps.enabled else (),
            sitemap_robots=s.sitemaps.enabled and s.sitemaps.robots,
            recrawl=RecrawlPolicy.from_settings(s.recrawl) if s.recrawl.enabled else None,
        )


def _no_reject(_ticket: Ticket, _reason: str) -> None:
    return None


def _no_foreign(_worker: int, _link: Link) -> None:
    return None


def no_variant(_meta: bytes) -> str:
    """Every request is a GET of its URL: its seen-set key is its canonical URL's."""
    return ""


@dataclass(slots=True, frozen=True, kw_only=True)
class FrontierHooks:
    """The frontier's collaborators.

    ``on_reject``: records a URL refused with a reason (a crawl-log outcome). ``route``: origin
    -> owning worker (worker mode; None: this process owns every host); ``worker``: this
    process's number; ``on_foreign``: takes a link to a host another worker owns.
    ``wall_clock`` dates the robots.txt cache (whose copies outlive a run) and reads
    Retry-After dates. ``variant``: what a request's stored meta adds to its canonical URL
    for its seen-set key ("" for a GET; the method and body of any other: the engine gives
    the spider's ``request_variant``), so two requests to one URL are two when they differ.
    """

    on_reject: Callable[[Ticket, str], None] = _no_reject
    route: Callable[[str], int] | None = None
    worker: int = 0
    on_foreign: Callable[[int, Link], None] = _no_foreign
    wall_clock: Callable[[], float] = time.time
    variant: Callable[[bytes], str] = no_variant
