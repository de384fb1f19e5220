"""The address policy: which IP addresses the crawler may connect to.

By default the crawler connects only to public addresses. These categories are refused
unless allowed (``fetch.allow_addresses`` names categories or CIDR networks):

==============  ===========================================================================
category        networks
==============  ===========================================================================
loopback        127.0.0.0/8, ::1
private         10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 (RFC 1918), fc00::/7 (ULA),
                fec0::/10 (deprecated site-local)
link-local      169.254.0.0/16 (cloud metadata services live here), fe80::/10
shared          100.64.0.0/10 (RFC 6598, carrier-grade NAT)
multicast       224.0.0.0/4, ff00::/8
unspecified     0.0.0.0/8, ::
reserved        240.0.0.0/4 (255.255.255.255 included)
==============  ===========================================================================

An IPv6 address that carries an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible
``::a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``) has the category of that IPv4
address.

The seeds' own hosts. A seed's host is the operator's choice: a connection for a URL of a
seed's host is never refused, and the categories of the addresses the configuration gives for
the seeds' hosts (a literal address in the seed, or a ``fetch.resolve`` entry) are allowed for
every host (so a crawl of ``http://127.0.0.1:8080/`` or of names resolved to loopback by
``fetch.resolve`` reaches the loopback hosts its scope allows). A seed name resolved by DNS
allows only itself, not its address's category: the operator names the category then.

The check runs in libcurl's ``OPENSOCKETFUNCTION`` (:meth:`AddressPolicy.why_refused`, through
``Transfer.open_socket``), on the address libcurl is about to connect to after name
resolution, so a name that resolves (or rebinds) to a refused address is caught whatever DNS
said before; a refused address is never sent a packet. It runs once per new connection, not
per request (a reused connection was checked when it was opened), and its answer per
address is remembered.

With a proxy, libcurl connects only to the proxy (the operator's choice, never refused) and
the proxy resolves and connects to the targets: the policy then checks targets that are
literal addresses in the URL (:meth:`AddressPolicy.refuses_url`); names are the proxy's to
police.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from contextlib import suppress
from urllib.parse import urlsplit

from frontier_crawl.config.settings import ADDRESS_CATEGORIES

__all__ = ["CATEGORIES", "PUBLIC", "AddressPolicy", "category", "parse_allowed"]

#: the category of every address outside the refused networks
PUBLIC = "public"

_IPv4 = ipaddress.IPv4Network
_IPv6 = ipaddress.IPv6Network

#: category -> its networks (module docstring)
CATEGORIES: dict[str, tuple[str, ...]] = {
    "loopback": ("127.0.0.0/8", "::1/128"),
    "private": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "fec0::/10"),
    "link-local": ("169.254.0.0/16", "fe80::/10"),
    "shared": ("100.64.0.0/10",),
    "multicast": ("224.0.0.0/4", "ff00::/8"),
    "unspecified": ("0.0.0.0/8", "::/128"),
    "reserved": ("240.0.0.0/4",),
}
assert tuple(CATEGORIES) == ADDRESS_CATEGORIES  # the config's list is this one
#: (version, first, last, category) of every refused network, as integers (cheap to compare)
_RANGES: tuple[tuple[int, int, int, str], ...] = tuple(
    (net.version, int(net.network_address), int(net.broadcast_address), name)
    for name, nets in CATEGORIES.items()
    for net in map(ipaddress.ip_network, nets)
)
#: IPv6 prefixes that carry an IPv4 address: (first, last, shift), the IPv4 address being
#: (value >> shift) & 0xFFFFFFFF
_V4_IN_V6: tuple[tuple[int, int, int], ...] = tuple(
    (int(net.network_address), int(net.broadcast_address), shift)
    for net, shift in (
        (_IPv6("::ffff:0:0/96"), 0),  # IPv4-mapped
        (_IPv6("64:ff9b::/96"), 0),  # NAT64 well-known prefix
        (_IPv6("2002::/16"), 80),  # 6to4
        (_IPv6("::/96"), 0),  # IPv4-compatible (deprecated); :: and ::1 are matched first
    )
)
_REMEMBERED = 4096  #: addresses whose answer is remembered (then the memory starts again)


def _parse(address: str) -> tuple[int, int]:
    """(IP version, the address as an integer); ValueError if it is none (socket.inet_pton:
    about ten times as fast as ipaddress.ip_address)."""
    text = address.strip("[]").partition("%")[0]  # no IPv6 zone id
    try:
        return 4, int.from_bytes(socket.inet_pton(socket.AF_INET, text), "big")
    except OSError:
        pass
    try:
        return 6, int.from_bytes(socket.inet_pton(socket.AF_INET6, text), "big")
    except (OSError, ValueError):
        raise ValueError(f"not an IP address: {address!r}") from None


def category(address: str) -> str:
    """The category of an IP address (module docstring): ``"public"`` outside every refused
    network. ValueError if ``address`` is not an IP address."""
    version, value = _parse(address)
    if version == 6 and value > 1:  # :: and ::1 are themselves
        for first, last, shift in _V4_IN_V6:
            if first <= value <= last:
                version, value = 4, (value >> shift) & 0xFFFFFFFF
                break
    for net_version, first, last, name in _RANGES:
        if net_version == version and first <= value <= last:
            return name
    return PUBLIC


def parse_allowed(entries: Iterable[str]) -> tuple[frozenset[str], tuple[_IPv4 | _IPv6, ...]]:
    """``fetch.allow_addresses`` entries as (categories, networks); ValueError naming an
    entry that is neither a category nor a CIDR network (or address)."""
    names: set[str] = set()
    networks: list[_IPv4 | _IPv6] = []
    for entry in entries:
        key = entry.strip().lower()
        if key in CATEGORIES:
            names.add(key)
            continue
        try:
            networks.append(ipaddress.ip_network(key, strict=False))
        except ValueError:
            raise ValueError(
                f"{entry!r} is neither an address category ({', '.join(CATEGORIES)}) nor a "
                "CIDR network such as '10.1.0.0/16' or 'fd00::/8'"
            ) from None
    return frozenset(names), tuple(networks)


def _host(url: str) -> str:
    """A URL's host name, lower-case, IPv6 without brackets ("" if it has none)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


class AddressPolicy:
    """Which addresses connections may go to (module docstring)."""

    def __init__(
        self,
        allowed: Iterable[str] = (),
        *,
        seed_hosts: Iterable[str] = (),
        seed_addresses: Iterable[str] = (),
    ) -> None:
        """``allowed``: ``fetch.allow_addresses`` entries; ``seed_hosts``: the seeds' host
        names (any address allowed for their URLs); ``seed_addresses``: the addresses the
        configuration gives for them (their categories allowed for every host)."""
        names, networks = parse_allowed(allowed)
        extra = set()
        for address in seed_addresses:
            with suppress(ValueError):  # not an address: libcurl refuses the entry itself
                extra.add(category(address))
        self.categories = frozenset(names | extra) - {PUBLIC}
        self.networks = networks
        self.seed_hosts = frozenset(h.lower().strip("[]") for h in seed_hosts)
        self._answers: dict[str, str] = {}  #: address -> "" if allowed, else its category

    @classmethod
    def for_crawl(
        cls, allowed: Iterable[str], seeds: Iterable[str], resolve: Iterable[str]
    ) -> AddressPolicy:
        """The policy of a crawl: ``fetch.allow_addresses``, the (canonical) seed URLs and the
        ``fetch.resolve`` entries ("host:port:addr[,addr...]")."""
        hosts = {_host(seed) for seed in seeds} - {""}
        addresses = set()
        for host in hosts:
            try:
                category(host)
            except ValueError:
                continue  # a name
            addresses.add(host)
        for entry in resolve:
            host, _port, addrs = entry.split(":", 2)
            if host.lower().lstrip("+") in hosts:
                addresses.update(a.strip().strip("[]") for a in addrs.split(","))
        return cls(allowed, seed_hosts=hosts, seed_addresses=addresses)

    def address_refused(self, address: str) -> str:
        """Why connections may not go to ``address`` (its category), whatever the host; ""
        if they may."""
        answer = self._answers.get(address)
        if answer is None:
            answer = self._decide(address)
            if len(self._answers) >= _REMEMBERED:
                self._answers.clear()
            self._answers[address] = answer
        return answer

    def _decide(self, address: str) -> str:
        try:
            kind = category(address)
        except ValueError:
            return "not an IP address"
        if kind == PUBLIC or kind in self.categories:
            return ""
        if self.networks:
            ip = ipaddress.ip_address(address.partition("%")[0])
            if any(ip.version == net.version and ip in net for net in self.networks):
                return ""
        return kind

    def why_refused(self, address: str, url: str) -> str:
        """Why a connection for ``url`` may not go to ``address`` (its category); "" if it
        may."""
        kind = self.address_refused(address)
        if kind and self.seed_hosts and _host(url) in self.seed_hosts:
            return ""
        return kind

    def refuses_url(self, url: str) -> str:
        """For a proxied request: "" unless the URL's host is a literal address that is
        refused (its category then)."""
        host = _host(url)
        if not host[:1].isdigit() and ":" not in host:
            return ""  # a name (an IPv4 address starts with a digit, an IPv6 one has a colon)
        try:
            category(host)
        except ValueError:
            return ""  # a name: the proxy resolves it
        return self.why_refused(host, url)
