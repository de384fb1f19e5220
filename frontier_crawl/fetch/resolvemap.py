"""``fetch.resolve`` entries, handed to libcurl one transfer at a time.

An entry ``host:port:address[,address...]`` (curl's ``--resolve``) pins a name to addresses.
libcurl reads a handle's ``RESOLVE`` list at the start of each transfer into the DNS cache
(the share's: every handle of the fetcher sees it). Setting the whole list on a handle costs
time that grows with the square of its length (pycurl appends each entry to a C list by
walking it, and libcurl inserts each one into a hash of a fixed 23 slots), and every new
handle paid it again. So the entries are parsed once into a dict keyed by ``host:port``, and
each transfer carries only the entries it can use: its own host's (or the port's wildcard
``*:port`` entry) and the proxy's.

An entry must be in the cache from the transfer's start (when libcurl loads it) to its name
lookup, which happens only when a new connection is set up. Loaded entries are therefore
made *non-permanent* (libcurl's ``+`` prefix): they age and are pruned like any looked-up
name (``fetch.dns_cache_ttl_s``, ``fetcher.py``'s prune), so the cache holds the names
fetched within that time, not every name ever fetched (libcurl never prunes a permanent
entry, and a lookup walks one of the 23 chains: a cache that grew with the crawl's hosts
would make each lookup cost that much more). A transfer reloads its entry (with a fresh
age), so an entry is never pruned between its load and its lookup while the TTL exceeds
``fetch.timeout_s`` (a transfer's whole life). With a shorter TTL (or 0: look names up every
time, which would drop a non-permanent entry at its own lookup) entries are loaded
permanent, as given. An entry that already starts with ``+`` is kept as written.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

import pycurl

__all__ = ["ResolveMap", "resolve_map"]

_DEFAULT_PORTS = {"http": 80, "https": 443, "socks4": 1080, "socks4a": 1080, "socks5": 1080,
                  "socks5h": 1080}  # fmt: skip


class ResolveMap:
    """The ``fetch.resolve`` entries by ``host:port`` (module docstring)."""

    __slots__ = ("_by_key", "_marked", "_prefix", "_proxy")

    def __init__(self, entries: Iterable[str], *, permanent: bool, proxy: str | None) -> None:
        """``entries`` as in ``fetch.resolve`` (validated by the config); ``permanent``: load
        them into libcurl's cache as permanent entries (module docstring); ``proxy``: the
        proxy URL, whose host's entry every transfer carries."""
        by_key: dict[str, str] = {}
        for entry in entries:
            host, _, rest = entry.partition(":")
            port, _, _addresses = rest.partition(":")
            by_key[f"{host.removeprefix('+').lower()}:{port}"] = entry
        self._by_key = by_key
        self._marked = any(entry[:1] == "+" for entry in by_key.values())  #: aging as written
        self._prefix = "" if permanent else "+"
        self._proxy: tuple[str, ...] = ()
        if proxy is not None and (key := _key(proxy)) in by_key:
            self._proxy = (self._loadable(by_key[key]),)

    def __len__(self) -> int:
        return len(self._by_key)

    @property
    def aging(self) -> bool:
        """Whether some entries go into libcurl's cache as aging ones (pruned by age)."""
        return self._prefix == "+" or self._marked

    def set_permanent(self, permanent: bool) -> None:
        """Load entries from now on as permanent (True) or aging (False) ones."""
        self._prefix = "" if permanent else "+"

    def entries_for(self, url: str) -> list[str]:
        """The entries a transfer of ``url`` carries: the proxy's, then its host's (its
        port's wildcard entry when the host has none); empty if none applies."""
        key = _key(url)
        entry = self._by_key.get(key)
        if entry is None:
            entry = self._by_key.get("*" + key[key.rfind(":") :])
        if entry is None:
            return list(self._proxy)
        return [*self._proxy, self._loadable(entry)]

    def apply(self, handle: pycurl.Curl, url: str) -> None:
        """Set the entries for a transfer of ``url`` on ``handle`` (nothing if none applies;
        ``reset()`` drops them when the handle goes back to the pool)."""
        entries = self.entries_for(url)
        if entries:
            handle.setopt(pycurl.RESOLVE, entries)

    def _loadable(self, entry: str) -> str:
        return entry if entry[0] == "+" else self._prefix + entry


class _NoEntries(ResolveMap):
    """No ``fetch.resolve`` entries: transfers carry none, and no URL is parsed for them."""

    __slots__ = ()

    @property
    def aging(self) -> bool:
        return False

    def entries_for(self, url: str) -> list[str]:
        return []

    def apply(self, handle: pycurl.Curl, url: str) -> None:
        return None


def resolve_map(entries: tuple[str, ...], *, permanent: bool, proxy: str | None) -> ResolveMap:
    """The map of ``entries``, or one that does nothing when there are none."""
    if entries:
        return ResolveMap(entries, permanent=permanent, proxy=proxy)
    return _NoEntries((), permanent=permanent, proxy=None)


def _key(url: str) -> str:
    """``host:port`` of a URL, host in lower case, port the scheme's default when it has none
    (``""`` for a URL without a host or with a bad port)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return ""
    if not host:
        return ""
    if port is None:
        port = _DEFAULT_PORTS.get(parts.scheme.lower(), 0)
    return f"{host}:{port}"
