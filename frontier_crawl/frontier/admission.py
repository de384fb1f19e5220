"""Admission: which links become queued URLs (canonical, in scope, owned here, unseen, no trap).

A link goes through, in order: the settled-link cache (a link whose fate cannot change is
skipped at the cost of one set lookup), canonicalisation (``urls.canonicalize``), the scope
(allowed domains, ``exclude``), its owner (worker mode: a link to a host another worker owns
is handed to ``on_foreign``), ``crawl.max_pages``, the seen-set (``seen.py``), the trap limits
(``traps.py``, ``max_pages_per_host``), and is then queued by the frontier's ``enqueue``.
A spider's request that is not a plain GET (a form's POST) is keyed in the seen-set by its
canonical URL plus its ``variant`` (method and body: ``FrontierHooks.variant``), and skips
the settled links below.

Settled links. A link (as given, before canonicalisation) whose fate cannot change for the rest
of the run is remembered in a bounded two-generation set once the transaction that decided it
has committed (:meth:`Admission.committed`), and later occurrences are skipped: links that are
not crawlable or not in scope (pure functions of the link and the configuration), links
another worker owns (sent in a committed outbox batch, which reaches the owner's seen-set; a
repeat would only be a duplicate there), and links that went through the seen-set (committed
there, and the seen database is append-only, so every later answer is "seen"). Until that
commit they are not remembered, so an aborted transaction loses nothing
(:meth:`Admission.aborted`). The one place a repeat is not a pure no-op, ``max_pages`` reached
(the loop stops at the next owned link), bypasses the set.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from itertools import filterfalse, islice
from typing import TYPE_CHECKING

from frontier_crawl.frontier.records import Ticket
from frontier_crawl.frontier.scope import ANY_PORT, PortScope, domain_allowed, domain_table
from frontier_crawl.frontier.store import QueueEntry
from frontier_crawl.frontier.traps import MAX_HOST_PAGES, Limits, trap_reason
from frontier_crawl.frontier.urls import (
    canonicalize,
    canonicalize_with_origin,
    host_of,
    origin,
    origin_digest,
)

if TYPE_CHECKING:
    import lmdb

    from frontier_crawl.frontier.hosts import HostQueue
    from frontier_crawl.frontier.mailbox import Link
    from frontier_crawl.frontier.seen import SeenSet

#: links whose canonical in-scope form is remembered for spiders' pages (in_scope_links)
SCOPED_LINKS = 32_768
OWNERS_MAX = 16_384  #: origins whose scope and owner are remembered
OUT_OF_SCOPE = -1  #: owner of an origin outside the allowed domains
_NO_REQUEST = ("", b"", 0)  #: a link's callback, meta and priority when it has none

Enqueue = Callable[["lmdb.Transaction[bytes]", str, QueueEntry, float], bool]


def _pattern(exclude: Iterable[str]) -> re.Pattern[str] | None:
    patterns = list(exclude)
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


class Admission:
    """The frontier's admission of links (scope, ownership, dedup, traps); see the module.

    ``hosts``: the frontier's host queues by origin (their admitted counts); ``enqueue``
    queues an admitted URL (False if its host refuses it); ``stored_admitted`` reads a host's
    admitted count of earlier runs; ``on_reject`` records a URL refused by a trap limit.
    """

    def __init__(
        self,
        *,
        allow_domains: Iterable[str],
        exclude: Iterable[str],
        limits: Limits,
        max_pages: int,
        settled_links: int,
        allow_ports: PortScope = ANY_PORT,
        route: Callable[[str], int] | None,
        worker: int,
        seen: SeenSet,
        hosts: Mapping[str, HostQueue],
        enqueue: Enqueue,
        stored_admitted: Callable[[lmdb.Transaction[bytes], str], int],
        on_reject: Callable[[Ticket, str], None],
        on_foreign: Callable[[int, Link], None],
        variant: Callable[[bytes], str],
    ) -> None:
        #: allowed domain -> whether the domain itself is allowed (False: "*." subdomains only)
        self._domain_set = domain_table(allow_domains)
        self._ports = allow_ports  #: the ports in scope
        self._exclude = _pattern(exclude)
        self.limits = limits
        self.max_pages = max_pages
        self._route = route  #: origin -> owning worker, None: this process owns every host
        self._worker = worker
        self._seen = seen
        self._hosts = hosts
        self._enqueue = enqueue
        self._stored_admitted = stored_admitted
        self._on_reject = on_reject
        self._on_foreign = on_foreign
        #: a request's meta -> what its seen-set key adds to its canonical URL ("": a GET)
        self._variant = variant
        #: origin -> owning worker or OUT_OF_SCOPE (bounded; see owner_of)
        self._owners: dict[str, int] = {}
        #: links settled by committed transactions, two generations (see the module)
        self._settled: set[str] = set()
        self._settled_old: set[str] = set()
        self._settled_half = settled_links // 2  #: 0: no settled-link set
        self._settling: list[str] = []  #: settled by the open transaction, not yet committed
        #: link -> its canonical form if in scope, "" if not (in_scope_links), two generations
        self._scoped: dict[str, str] = {}
        self._scoped_old: dict[str, str] = {}

    def reconfigure(
        self, allow_domains: Iterable[str], exclude: Iterable[str], limits: Limits, max_pages: int,
        allow_ports: PortScope = ANY_PORT,
    ) -> None:  # fmt: skip
        """A reloaded scope and limits: they apply to links found from now on (the owners and
        the links remembered as settled are forgotten)."""
        self._domain_set = domain_table(allow_domains)
        self._ports = allow_ports
        self._owners.clear()
        self._settled, self._settled_old = set(), set()
        self._exclude = _pattern(exclude)
        self.limits = limits
        self.max_pages = max_pages

    # ----------------------------------------------------------------------------- scope

    def domain_allowed(self, host: str) -> bool:
        """Is ``host`` one of the allowed domains or a subdomain of one (no list: any)?"""
        return not self._domain_set or domain_allowed(self._domain_set, host)

    def origin_allowed(self, url: str) -> bool:
        """Is a canonical URL's host allowed, on a port in scope (``scope.PortScope``)?"""
        return self.domain_allowed(host_of(url)) and self._ports.allows(url)

    def in_scope(self, url: str) -> bool:
        """Is a canonical URL inside the allowed domains, on a port in scope, not excluded?"""
        if not self.origin_allowed(url):
            return False
        return self._exclude is None or self._exclude.search(url) is None

    def in_scope_links(self, links: Sequence[str]) -> list[str]:
        """The canonical forms of ``links`` that are crawlable and in scope (allowed domains,
        not excluded), deduplicated, in order: the page's links a spider's callback sees.
        Nothing is admitted or recorded (the seen-set, robots.txt and the trap limits are for
        :meth:`admit`, when the callback yields them). A link's answer is a pure function of
        the link and the configuration, so the recent ones are remembered (bounded, two
        generations): a page's links that were seen before cost a C-level dict lookup each."""
        found: list[str | None] = list(map(self._scoped.get, links))
        if None in found:  # the links not remembered, found by C-level scans
            i = found.index(None)
            while True:
                found[i] = self._scope_one(links[i])
                try:
                    i = found.index(None, i + 1)
                except ValueError:
                    break
        out = dict.fromkeys(found)
        out.pop("", None)
        return list(out)  # type: ignore[arg-type]  # None no longer in it

    def _scope_one(self, raw: str) -> str:
        """A link's canonical form if in scope, else "" (remembered: in_scope_links)."""
        url = self._scoped_old.get(raw)
        if url is None:
            url = canonicalize(raw) or ""
            if url:
                host_key = origin(url)
                owner = self._owners.get(host_key)
                if owner is None:
                    owner = self.owner_of(host_key)
                if owner == OUT_OF_SCOPE or (
                    self._exclude is not None and self._exclude.search(url)
                ):
                    url = ""
        if len(self._scoped) >= SCOPED_LINKS // 2:
            self._scoped_old, self._scoped = self._scoped, {}
        self._scoped[raw] = url
        return url

    def owner_of(self, host_key: str) -> int:
        """The worker that admits URLs of origin ``host_key``; ``OUT_OF_SCOPE`` when its host is
        outside the allowed domains or its port is not in scope. Remembered per origin
        (bounded): both answers are fixed for the life of the frontier."""
        if (
            self._domain_set and not domain_allowed(self._domain_set, host_of(host_key))
        ) or not self._ports.allows(host_key):
            owner = OUT_OF_SCOPE
        elif self._route is None:
            owner = self._worker
        else:
            owner = self._route(host_key)
        owners = self._owners
        if len(owners) >= OWNERS_MAX:
            for key in list(islice(owners, len(owners) // 2)):  # the older half
                del owners[key]
        owners[host_key] = owner
        return owner

    # ----------------------------------------------------------------------------- admission

    def admit(
        self,
        txn: lmdb.Transaction[bytes],
        urls: Iterable[str],
        depth: int,
        referrer: str | None,
        hops: int,
        now: float,
        request: tuple[str, bytes, int] | None,
        admitted: int,
    ) -> int:
        """Admit ``urls`` inside the transaction ``txn`` (``request``: (callback, meta,
        priority) if any is set; ``admitted``: URLs the crawl admitted so far, for max_pages).
        Returns how many were queued."""
        added = 0
        limits = self.limits
        max_pages = self.max_pages
        exclude = self._exclude
        owners = self._owners
        worker = self._worker
        settling = self._settling
        young, old = self._settled, self._settled_old  # swapped only after a commit
        add_new = self._seen.add_new
        enqueue = self._enqueue
        per_host = limits.max_pages_per_host
        # a request other than a GET of its URL (a form's POST): its seen-set key is its URL
        # with its method and body, and it neither reads nor feeds the settled links (which
        # are a URL's GETs)
        variant = self._variant(request[1]) if request is not None and request[1] else ""
        if variant:
            young, old, settling = set(), set(), []
        screened = bool(young or old)
        if screened and (
            not max_pages or (isinstance(urls, Sized) and admitted + len(urls) < max_pages)
        ):
            # max_pages cannot be reached by these links: the settled ones are skipped by
            # C-level filters, not one loop turn each (a page's repeated navigation links)
            urls = filterfalse(old.__contains__, filterfalse(young.__contains__, urls))
            screened = False
        for raw in urls:
            if (
                screened
                and (raw in young or raw in old)
                and not (max_pages and admitted + added >= max_pages)
            ):
                continue
            canonical = canonicalize_with_origin(raw)
            if canonical is None:
                settling.append(raw)
                continue
            url, host_key = canonical
            owner = owners.get(host_key)
            if owner is None:
                owner = self.owner_of(host_key)
            if owner == OUT_OF_SCOPE or (exclude is not None and exclude.search(url)):
                settling.append(raw)
                continue
            if owner != worker:
                self._on_foreign(owner, (url, depth, referrer, hops, *(request or _NO_REQUEST)))
                settling.append(raw)
                continue
            if max_pages and admitted + added >= max_pages:
                break
            settling.append(raw)
            if not add_new(txn, origin_digest(url + variant, host_key)):
                continue
            reason = trap_reason(url, depth, limits)
            if reason is None and per_host:
                queue = self._hosts.get(host_key)
                count = (
                    queue.admitted if queue is not None else self._stored_admitted(txn, host_key)
                )
                if count >= per_host:
                    reason = MAX_HOST_PAGES
            if reason is not None:
                self._on_reject(Ticket(b"", host_key, url, depth, hops, 0, referrer), reason)
                continue
            if request is None:
                entry = QueueEntry(url, depth, hops, 0, referrer)
            else:
                entry = QueueEntry(url, depth, hops, 0, referrer, *request)
            added += enqueue(txn, host_key, entry, now)
        return added

    def committed(self) -> None:
        """After a commit: remember the links its transaction settled."""
        settling = self._settling
        if not settling:
            return
        if not self._settled_half:
            settling.clear()
            return
        young = self._settled
        young.update(settling)
        settling.clear()
        if len(young) >= self._settled_half:  # age the generations
            self._settled_old = young
            self._settled = set()

    def aborted(self) -> None:
        """After an abort: what the transaction settled is not settled."""
        self._settling.clear()
