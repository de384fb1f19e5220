"""What a Scrapy-style spider class says about the crawl, made part of its settings.

:func:`adopt` reads the spider class ``[spider]`` names (before any request, where the config
is loaded: the command line, a reload) and returns the settings the crawl runs with:

- ``start_urls``, and the URLs of ``start_requests()`` when the spider overrides it, are added
  to ``crawl.seeds`` (after the config's, without repeats), so the seeds' checks, the scope
  (the seeds' hosts when ``scope.allow_domains`` is empty) and the address policy see them; a
  config with no seed is valid when the spider has start URLs. (The engine adds the
  ``start_requests()`` themselves, with their callbacks and meta, before the seeds: a URL
  keeps what it was first admitted with.)
- ``allowed_domains`` narrows the scope: with an empty ``scope.allow_domains`` it becomes the
  scope; with both, the scope is their intersection (a domain of one list that lies within a
  domain of the other), and an empty intersection is a config error.
- ``custom_settings``: each Scrapy setting that has a crawl.toml equivalent sets it (the
  spider's value wins over crawl.toml's, as in Scrapy; each one is logged); any other is a
  :class:`ConfigError` naming the crawl.toml key to use, or saying there is none.
- The spider attributes Scrapy's components read: ``download_delay``, ``download_timeout``,
  ``download_maxsize`` and ``user_agent`` set their crawl.toml keys (``ATTRIBUTES``; over
  crawl.toml and custom_settings, as in Scrapy); the others (``http_user``, ``rules``,
  ``sitemap_urls``, a ``from_crawler`` of the spider's own...) are a :class:`ConfigError`
  saying what to use instead (``REFUSED_ATTRIBUTES``).

Idempotent: adopting adopted settings changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from frontier_crawl.config import ConfigError, CrawlSettings
from frontier_crawl.spider import load
from frontier_crawl.spider.api import Spider
from frontier_crawl.spider.start import overrides_start, start_objects

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ATTRIBUTES", "MAPPED_SETTINGS", "REFUSED_ATTRIBUTES", "adopt", "scrapy_settings"]

log = logging.getLogger(__name__)

_NO_LIMIT = 2**62


def _nonneg_int(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"expected a non-negative int, got {value!r}")
    return value


def _unlimited_zero(value: Any) -> int:
    """Scrapy's 0 means no limit; crawl.toml's limit is then the largest it takes."""
    return _nonneg_int(value) or _NO_LIMIT


def _number(value: Any) -> float:
    if type(value) not in (int, float):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise ValueError(f"expected True or False, got {value!r}")
    return value


def _str(value: Any) -> str:
    if type(value) is not str:
        raise ValueError(f"expected a string, got {value!r}")
    return value


#: Scrapy setting -> (crawl.toml section, key, conversion)
MAPPED_SETTINGS: dict[str, tuple[str, str, Callable[[Any], Any]]] = {
    "DOWNLOAD_DELAY": ("politeness", "min_delay_s", _number),
    "CONCURRENT_REQUESTS_PER_DOMAIN": ("politeness", "connections_per_host", _nonneg_int),
    "CONCURRENT_REQUESTS": ("fetch", "concurrency", _nonneg_int),
    "USER_AGENT": ("politeness", "user_agent", _str),
    "ROBOTSTXT_OBEY": ("politeness", "obey_robots", _bool),
    "DEPTH_LIMIT": ("crawl", "max_depth", _unlimited_zero),
    "CLOSESPIDER_PAGECOUNT": ("crawl", "max_pages", _nonneg_int),
    "DOWNLOAD_TIMEOUT": ("fetch", "timeout_s", _number),
    "DOWNLOAD_MAXSIZE": ("fetch", "max_body_bytes", _unlimited_zero),
    "RETRY_TIMES": ("fetch", "retries", _nonneg_int),
    "REDIRECT_MAX_TIMES": ("fetch", "max_redirects", _nonneg_int),
    "HTTPCACHE_ENABLED": ("fetch", "cache", _bool),
    "AUTOTHROTTLE_MAX_DELAY": ("politeness", "max_delay_s", _number),
    "COOKIES_ENABLED": ("spider", "cookies", _bool),
}

#: Scrapy settings with no one-to-one key: what to use instead
_HINTS = {
    "ITEM_PIPELINES": "list them in crawl.toml's spider.pipelines",
    "FEEDS": "use crawl.toml's [[output.feeds]]",
    "FEED_URI": "use crawl.toml's [[output.feeds]]",
    "FEED_FORMAT": "use crawl.toml's [[output.feeds]] format",
    "CONCURRENT_REQUESTS_PER_IP": "set politeness.per_ip = true and "
    "politeness.connections_per_host in crawl.toml",
    "AUTOTHROTTLE_ENABLED": "the adaptive delay is always on: politeness.delay_factor "
    "(0 turns it off) and politeness.max_delay_s in crawl.toml",
    "RETRY_ENABLED": "set fetch.retries in crawl.toml (0: no retries)",
    "JOBDIR": "the crawl state is always kept, in crawl.output_dir",
    "DEFAULT_REQUEST_HEADERS": "give Request(headers=...), or politeness.user_agent",
    "HTTPERROR_ALLOWED_CODES": "give the spider a handle_status attribute",
    "LOG_LEVEL": "logging is set on the command line (-v)",
    "COOKIES_DEBUG": "cookies are secrets: they are never logged (the WARC records hold the "
    "Cookie and Set-Cookie headers as exchanged)",
}


#: spider attribute Scrapy reads -> the Scrapy setting it overrides (mapped as that setting)
ATTRIBUTES = {
    "download_delay": "DOWNLOAD_DELAY",
    "download_timeout": "DOWNLOAD_TIMEOUT",
    "download_maxsize": "DOWNLOAD_MAXSIZE",
    "user_agent": "USER_AGENT",
}
#: spider attributes Scrapy reads that have no equivalent here: what to use instead
REFUSED_ATTRIBUTES = {
    "http_user": "send Request(headers={'Authorization': 'Basic ...'}) (credentials go only "
    "to the request's origin)",
    "http_pass": "send Request(headers={'Authorization': 'Basic ...'})",
    "http_auth_domain": "send Request(headers={'Authorization': ...}) to that domain",
    "download_warnsize": "remove it: fetch.max_body_bytes is the one size limit",
    "rules": "CrawlSpider's rules are not supported: yield response.follow_all(css=..., "
    "callback=...) from parse(), or use crawl.toml [[extract]] rules",
    "sitemap_urls": "SitemapSpider is not supported: crawl.toml [sitemaps] enabled = true "
    "and sitemaps.paths",
    "sitemap_rules": "SitemapSpider is not supported: crawl.toml [sitemaps]",
    "max_concurrent_requests": "set politeness.connections_per_host in crawl.toml",
}


def adopt(settings: CrawlSettings) -> CrawlSettings:
    """The settings with the spider class's start URLs, allowed_domains and custom_settings
    applied (see the module docstring); ConfigError naming the key if one is bad."""
    section = settings.spider
    if section.source is None:
        _require_seeds(settings.crawl.seeds, False)
        return settings
    cls = load.spider_class(section)
    raw: dict[str, Any] = {}
    custom = getattr(cls, "custom_settings", None)
    if custom:
        _custom(cls, custom, settings, raw)
    _attributes(cls, settings, raw)
    seeds = list(settings.crawl.seeds)
    known = set(seeds)
    for url in start_urls(cls):
        if url not in known:
            known.add(url)
            seeds.append(url)
    _require_seeds(seeds, True)
    if tuple(seeds) != settings.crawl.seeds:
        raw.setdefault("crawl", {})["seeds"] = seeds
    allowed = _strings(getattr(cls, "allowed_domains", ()), cls, "allowed_domains")
    if allowed:
        scope = _intersect(settings.scope.allow_domains, allowed, cls)
        if scope != settings.scope.allow_domains:
            raw.setdefault("scope", {})["allow_domains"] = list(scope)
    if not raw:
        return settings
    data = msgspec.to_builtins(settings)
    for name, values in raw.items():
        data[name].update(values)
    try:
        return msgspec.convert(data, CrawlSettings, strict=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"spider.class: {cls.__name__}: {exc}") from None


def start_urls(cls: type[Spider]) -> list[str]:
    """The spider's start URLs: ``start_urls``, or the URLs its ``start()`` (or
    ``start_requests()``) yields when the class overrides one (called on a throwaway
    instance: ``start.py``)."""
    if not overrides_start(cls):
        if not getattr(cls, "start_urls", ()) and hasattr(cls, "start_url"):
            start_objects(load.instantiate(cls, "spider.class"))  # its error
        return _strings(getattr(cls, "start_urls", ()), cls, "start_urls")
    out = []
    for req in start_objects(load.instantiate(cls, "spider.class")):
        url = req.url
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"spider.class: {cls.__name__}'s start requests hold {req!r}: expected a "
                "Request with an absolute http(s) URL"
            )
        out.append(url)
    return out


def _require_seeds(seeds: Iterable[str], spider: bool) -> None:
    if not list(seeds):
        where = ", or start_urls / start_requests() in the spider" if spider else ""
        raise ConfigError(
            f"crawl.seeds: at least one seed is required (or crawl.seeds_file{where})"
        )


def _strings(value: Any, cls: type[Spider], attr: str) -> list[str]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"spider.class: {cls.__name__}.{attr} must be a list of strings, got {value!r}"
        )
    return list(value)


def _under(domain: str, parent: str) -> bool:
    d, p = domain.lower().strip("."), parent.lower().strip(".")
    return d == p or d.endswith("." + p)


def _intersect(config: tuple[str, ...], spider: list[str], cls: type[Spider]) -> tuple[str, ...]:
    if not config:
        return tuple(spider)
    out: list[str] = []
    for a in config:
        bare_a = a.removeprefix("*.")
        for b in spider:
            if _under(b, bare_a) and (b != bare_a or not a.startswith("*.")):
                out.append(b)
            elif _under(bare_a, b):
                out.append(a)
    result = tuple(dict.fromkeys(out))
    if not result:
        raise ConfigError(
            f"scope.allow_domains: {list(config)} and {cls.__name__}.allowed_domains "
            f"{spider} have no domain in common, so nothing could be crawled"
        )
    return result


def _custom(
    cls: type[Spider], custom: Mapping[str, Any], settings: CrawlSettings, raw: dict[str, Any]
) -> None:
    for key, value in custom.items():
        where = f"spider.class: {cls.__name__}.custom_settings[{key!r}]"
        mapped = MAPPED_SETTINGS.get(key)
        if mapped is None:
            hint = _HINTS.get(key)
            if hint is None:
                names = ", ".join(sorted(MAPPED_SETTINGS))
                hint = f"it has no crawl.toml equivalent; the Scrapy settings that map are {names}"
            raise ConfigError(f"{where}: not supported: {hint}")
        section, name, convert = mapped
        try:
            converted = convert(value)
        except ValueError as exc:
            raise ConfigError(f"{where} (crawl.toml {section}.{name}): {exc}") from None
        before = getattr(getattr(settings, section), name)
        if before != converted:
            log.info("%s = %r sets %s.%s (crawl.toml: %r)", key, value, section, name, before)
        raw.setdefault(section, {})[name] = converted


def _attributes(cls: type[Spider], settings: CrawlSettings, raw: dict[str, Any]) -> None:
    """The spider attributes Scrapy reads: mapped (ATTRIBUTES) or refused
    (REFUSED_ATTRIBUTES)."""
    for attr, instead in REFUSED_ATTRIBUTES.items():
        if getattr(cls, attr, None) is not None:
            raise ConfigError(f"spider.class: {cls.__name__}.{attr} is not supported: {instead}")
    if "from_crawler" in {k for klass in cls.__mro__ if klass is not Spider
                          for k in vars(klass)}:  # fmt: skip
        raise ConfigError(
            f"spider.class: {cls.__name__}.from_crawler is not supported: the spider is made "
            "with no arguments; set it up in __init__() or open() (its settings are "
            "self.settings, Scrapy's names)"
        )
    for attr, key in ATTRIBUTES.items():
        value = getattr(cls, attr, None)
        if value is None:
            continue
        section, name, convert = MAPPED_SETTINGS[key]
        where = f"spider.class: {cls.__name__}.{attr} (crawl.toml {section}.{name})"
        try:
            converted = convert(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        before = raw.get(section, {}).get(name, getattr(getattr(settings, section), name))
        if before != converted:
            log.info("%s.%s = %r sets %s.%s (was %r)", cls.__name__, attr, value, section, name,
                     before)  # fmt: skip
        raw.setdefault(section, {})[name] = converted


def scrapy_settings(settings: CrawlSettings) -> load.ScrapySettings:
    """The crawl's settings under their Scrapy names (what ``crawler.settings`` answers), with
    the spider's other custom_settings... (there are none: any other is refused) and BOT_NAME."""
    out = load.ScrapySettings()
    for key, (section, name, _) in MAPPED_SETTINGS.items():
        value = getattr(getattr(settings, section), name)
        if value == _NO_LIMIT and key in ("DEPTH_LIMIT", "DOWNLOAD_MAXSIZE"):
            value = 0
        out[key] = value
    return out
