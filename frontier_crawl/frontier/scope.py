"""The crawl's scope: ``scope.allow_domains`` entries made to match, and seeds checked to be in it.

An entry is a host name, as the hosts of canonical URLs are written: it is normalised the same
way (IDNA UTS-46 non-transitional, lower case, one trailing dot dropped: ``München.DE.`` is
``xn--mnchen-3ya.de``) and matches that host and its subdomains. ``*.example.com`` matches the
subdomains of ``example.com`` only, not ``example.com`` itself. An IPv4 address matches itself;
an IPv6 address is written in brackets (``[::1]``). What no URL's host can ever equal is a
configuration error naming the entry (``scope.allow_domains[0]: ...``): a scheme
(``https://example.com``), a port (``example.com:8080``), a path, userinfo, a ``*`` anywhere
but a leading ``*.``, and anything that is not a host name.

Ports. A URL is in scope only on a port of the site: its scheme's default (none written), 80
or 443 (so ``http`` -> ``https`` on one host stays in scope), the explicit port of any seed
(``http://a.test:8080/`` as a seed makes port 8080 of every allowed host part of the crawl),
or the port a ``fetch.resolve`` entry names for its host (``b.test:9000:127.0.0.1``: the
operator sends the crawler there). Another port of an allowed host is another service (a
browser's origin, Heritrix's SURT prefix) and out of scope, unless ``scope.any_port`` is true
(every port of an allowed host, as before this rule). :func:`scope_ports` builds the
:class:`PortScope` of a config.

A seed that is not a crawlable URL, lies outside ``allow_domains`` or matches ``exclude`` would
never be fetched: a configuration error too (``crawl.seeds[0]: ...``). Both are checked by
:func:`check_scope` before any request (the CLI calls it right after loading the config;
``Frontier.from_settings`` calls it again).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frontier_crawl.config import ConfigError
from frontier_crawl.frontier.urls import canonical_host, canonicalize, host_of, port_of

if TYPE_CHECKING:
    from frontier_crawl.config import CrawlSettings

__all__ = [
    "ANY_PORT",
    "DEFAULT_PORTS",
    "SUBDOMAINS_ONLY",
    "PortScope",
    "check_scope",
    "domain_allowed",
    "domain_table",
    "normalise_domain",
    "scope_ports",
]

#: the ports of the web's two schemes, in scope on every allowed host
DEFAULT_PORTS = frozenset((80, 443))

SUBDOMAINS_ONLY = "*."
"""Prefix of an ``allow_domains`` entry that matches the subdomains only."""

_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def normalise_domain(entry: str) -> str:
    """The canonical spelling of one ``allow_domains`` entry; ValueError says what is wrong."""
    text = entry.strip()
    if not text:
        raise ValueError("empty entry")
    if _SCHEME_RE.match(text):
        raise ValueError("a host name, not a URL: remove the scheme")
    prefix = ""
    if text.startswith(SUBDOMAINS_ONLY):
        prefix, text = SUBDOMAINS_ONLY, text[len(SUBDOMAINS_ONLY) :]
    if "/" in text or "?" in text or "#" in text:
        raise ValueError("a host name, not a URL: remove the path")
    if "@" in text:
        raise ValueError("a host name only: remove the userinfo")
    if (text.startswith("[") and "]:" in text) or (not text.startswith("[") and ":" in text):
        raise ValueError("a host name only: a port never matches (scope is by host)")
    host = canonical_host(text) if "*" not in text else None
    if host is None:
        raise ValueError("not a host name (a leading '*.' is the only wildcard)")
    return prefix + host


def domain_table(domains: Iterable[str]) -> dict[str, bool]:
    """Normalised entries as a lookup table: domain -> whether the domain itself matches
    (False for a ``*.`` entry, which matches its subdomains only)."""
    table: dict[str, bool] = {}
    for entry in domains:
        apex = not entry.startswith(SUBDOMAINS_ONLY)
        name = entry if apex else entry[len(SUBDOMAINS_ONLY) :]
        name = name.lower().strip(".")
        table[name] = table.get(name, False) or apex
    return table


def domain_allowed(table: Mapping[str, bool], host: str) -> bool:
    """Is ``host`` (canonical) matched by ``table`` (:func:`domain_table`)? Looks up the host,
    then each suffix after a dot, instead of one ``endswith`` per entry."""
    if table.get(host):
        return True
    dot = host.find(".")
    while dot >= 0:
        if host[dot + 1 :] in table:
            return True
        dot = host.find(".", dot + 1)
    return False


def check_scope(settings: CrawlSettings) -> tuple[str, ...]:
    """The normalised ``allow_domains`` (the seeds' hosts when it is empty); ConfigError naming
    the key when an entry cannot match or a seed is outside the scope (module docstring)."""
    domains: list[str] = []
    for i, entry in enumerate(settings.scope.allow_domains):
        try:
            domains.append(normalise_domain(entry))
        except ValueError as exc:
            raise ConfigError(f"scope.allow_domains[{i}]: {exc}, got {entry!r}") from None
    table = domain_table(domains)
    exclude = settings.scope.exclude
    pattern = re.compile("|".join(f"(?:{p})" for p in exclude)) if exclude else None
    hosts: list[str] = []
    for i, seed in enumerate(settings.crawl.seeds):
        url = canonicalize(seed)
        if url is None:
            raise ConfigError(f"crawl.seeds[{i}]: not a crawlable URL, got {seed!r}")
        host = host_of(url)
        if table and not domain_allowed(table, host):
            raise ConfigError(
                f"crawl.seeds[{i}]: {seed!r} is outside scope.allow_domains "
                f"({', '.join(domains)}), so it would never be fetched"
            )
        if pattern is not None and pattern.search(url):
            raise ConfigError(
                f"crawl.seeds[{i}]: {seed!r} matches scope.exclude, so it would never be fetched"
            )
        hosts.append(host)
    return tuple(domains) if domains else tuple(dict.fromkeys(hosts))



@dataclass(slots=True, frozen=True)
class PortScope:
    """The ports in scope (module docstring): ``ports`` on every allowed host (80, 443 and the
    seeds' explicit ports), ``host_ports`` on one host each (``fetch.resolve`` entries), any
    port with ``any_port``."""

    ports: frozenset[int] = DEFAULT_PORTS
    host_ports: frozenset[tuple[str, int]] = frozenset()
    any_port: bool = False

    def allows(self, origin_or_url: str) -> bool:
        """Is the port of a canonical origin or URL in scope? One without an explicit port is
        on its scheme's default, always in scope."""
        if self.any_port:
            return True
        port = port_of(origin_or_url)
        return (
            port is None or port in self.ports or (host_of(origin_or_url), port) in self.host_ports
        )


#: every port of an allowed host (``scope.any_port``)
ANY_PORT = PortScope(any_port=True)


def scope_ports(settings: CrawlSettings) -> PortScope:
    """The ports in scope of ``settings`` (module docstring)."""
    if settings.scope.any_port:
        return ANY_PORT
    ports = set(DEFAULT_PORTS)
    for seed in settings.crawl.seeds:
        url = canonicalize(seed)
        port = port_of(url) if url is not None else None
        if port is not None:
            ports.add(port)
    named: set[tuple[str, int]] = set()
    for entry in settings.fetch.resolve:  # "host:port:address", checked by the config
        name, port_text, _ = entry.split(":", 2)
        host = canonical_host(name)
        if host is not None:
            named.add((host, int(port_text)))
    return PortScope(frozenset(ports), frozenset(named))
