"""The frontier: which URL to fetch next, and when, so that every host is treated politely.

Mechanism (policy lives in ``politeness.py`` and ``traps.py``):

* Every admitted URL is written to the LMDB queue database (``store.py``) in the same
  transaction that records it in the seen-set: the URLs a transaction queues for one host form
  one block under the key ``host id, rank, seq``. A URL is marked done in its block (and the
  block deleted once all its URLs are) only when its fetch is complete. LMDB is therefore the
  truth about outstanding work: a process killed at any instant loses no URL, and refetches
  only what was in flight or completed in the transaction that was not committed.
* Each host (origin) has a :class:`HostQueue` whose in-memory ``hot`` deque caches the head of its
  LMDB queue. One global budget (``memory_urls``) caps the hot entries of all hosts together;
  past it, new URLs stay only in LMDB (``unloaded``) and are read back in batches when the host's
  deque runs dry (``loaded_upto`` remembers where the in-memory prefix ends). A host's queue is
  in key order, which is priority order (``store.rank_of``: a spider request's higher
  ``priority`` first, FIFO among equals): a URL that sorts before ``loaded_upto`` is put in
  its place in the deque, a URL of the same or a lower priority appended (no search in the
  common case, every URL priority 0), and over the budget the deque's last entry goes back to
  LMDB (``_hold_ahead``). A host with nothing queued keeps no deque and no parsed robots.txt,
  so an idle host costs ~280 bytes (its HostQueue is 216, its origin string and dict entry the
  rest).
* A host is in exactly one :class:`HostState` (``hosts.py``). READY hosts wait in a FIFO, SNOOZED
  hosts in a heap ordered by wake time, BUSY hosts (all connections used, or robots.txt in
  flight) in neither, so a waiting host never holds a fetch slot. :meth:`HostQueues.move` is
  the one transition, :meth:`HostQueues.settle` places a host by its facts.
* Politeness is a wake time per host (and per IP group with ``per_ip``). The delay
  (``delay_for(...)``: min_delay_s, the adaptive delay, Crawl-delay) is a rate: two request starts
  to one host are never closer than it, however many connections are open (each start moves
  ``next_at`` to ``start + delay``); with one connection per host the next request also waits
  that long after the end of the previous response. ``connections_per_host`` only bounds how
  many requests are open at once. Host-wide trouble (429/503 with their Retry-After, DNS and
  connect failures, failures of ``host_error_urls`` distinct URLs in a row) adds the per-host
  backoff from the end of the response. A Crawl-delay of any length just snoozes.
* A URL that failed transiently waits for its own retry time in its host's ``retries`` heap,
  behind the host's other queued URLs: one bad URL never holds its host's healthy ones.
* robots.txt is the first request to every host (a robots :class:`Ticket`), unless a fresh copy is
  in the disk cache. Until it is known the host issues nothing else. Once its rules are
  ``robots_ttl_s`` old (24 h at most, RFC 9309 2.4) they are refreshed: robots.txt takes the
  host's next request slot and its other slots go on with the old rules until the answer.
  While robots.txt is unreachable (429, 5xx, no answer) the copy at hand, or an out-of-date
  one from the disk cache, stands in for up to ``robots_stale_s`` past its TTL, and the fetch
  is retried (``robots_done``).
* robots.txt redirects are followed here, hop by hop, never by libcurl: a 3xx answer to a
  robots ticket comes back through :meth:`Frontier.robots_redirect`, which checks the target
  against the scope (canonical, inside ``allow_domains``) and hands it out as the host's next
  robots ticket (``hops`` + 1) at the next :meth:`Frontier.next_ready`, first, while the host
  still waits. The engine stops after five hops (RFC 9309 2.3.1.2) and treats a chain it
  stops following (more hops, a target out of scope, or refused by the address policy) as
  "unavailable".
* A continuous crawl (``[recrawl] enabled``, ``recrawl.py``): :meth:`Frontier.complete`
  schedules each fetched URL's next visit, written with its ``mark_done``; due revisits are
  loaded a bounded number at a time into their host's ``revisits`` heap and handed out by
  ``next_ready`` under the same politeness, robots rules and IP groups as new URLs (their share
  of a host with new URLs queued bounded by ``revisit_share``), their ticket's ``last`` holding
  the previous capture. Without recrawl none of it runs (one attribute check per completion).
* ``identity.json`` in the state directory pins what a crawl cannot change between runs (layout
  version, seen-set sizing); tunables may change freely.
"""

from __future__ import annotations

import bisect
import errno
import heapq
import json
import logging
import os
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin

import lmdb
import msgspec

from frontier_crawl.config.settings import SITEMAP_CALLBACK
from frontier_crawl.frontier.admission import Admission
from frontier_crawl.frontier.completion import (
    HOST_STATUSES,
    Completion,
    Failure,
    RetryPolicy,
    Settled,
    answer_s,
    failure_of,
    hold_for,
    retry_after_s,
    retry_in,
)
from frontier_crawl.frontier.damage import DamagedState
from frontier_crawl.frontier.hosts import HostQueue, HostQueues, HostState, IpGroup, Ticket
from frontier_crawl.frontier.identity import LAYOUT_VERSION as LAYOUT_VERSION  # (re-exported)
from frontier_crawl.frontier.identity import (
    StateMismatch,
    check_identity,
)
from frontier_crawl.frontier.mailbox import INBOX_ENV, Inbox, Link, decode_links, encode_links
from frontier_crawl.frontier.options import FrontierHooks, FrontierOptions
from frontier_crawl.frontier.politeness import DelayPolicy, delay_for, host_backoff
from frontier_crawl.frontier.recrawl import DUE_KEY_LEN, HostRevisits, Recrawl, RecrawlPolicy
from frontier_crawl.frontier.robots import MAX_ROBOTS_TTL_S, RobotsCache, Rules, product_token
from frontier_crawl.frontier.scope import check_scope
from frontier_crawl.frontier.seen import SeenSet
from frontier_crawl.frontier.store import (
    DEFAULT_RANK,
    QueueEntry,
    QueueStore,
    key_before,
    key_rank,
    open_checked_env,
    rank_of,
    storage_errno,
    storage_error,
    storage_errors,
)
from frontier_crawl.frontier.traps import Limits
from frontier_crawl.frontier.urls import canonicalize, host_of, origin
from frontier_crawl.safefs import make_dir

if TYPE_CHECKING:
    from frontier_crawl.config import CrawlSettings

log = logging.getLogger(__name__)

#: errnos of a write without room: a skipped Bloom snapshot, not a failed crawl
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)

REFILL_BATCH = 512
_ENTRY_KEY = itemgetter(0)  #: the key of a host's (key, entry) in memory
_ADMITTED_KEY = b"admitted"  #: blobs: URLs admitted by the crawl, all runs (u64)
_ADMITTED_PREFIX = b"admitted:"  #: blobs: + origin -> its admitted URLs, with max_pages_per_host
#: blobs: the operator's crawl-state commands (control API), JSON: blocked host names, and
#: host name -> delay (seconds). Written in the transaction open when they are applied.
_BLOCKED_KEY = b"control:blocked"
_HOST_DELAYS_KEY = b"control:host-delays"
FRONTIER_ENV = "frontier.lmdb"  #: the frontier's LMDB environment, in the state directory
#: what a damaged frontier environment, set aside, means for the crawl
_FRESH_FRONTIER = (
    "The crawl starts afresh from the seeds: pages fetched before are fetched again (the "
    "earlier runs' WARC files and crawl-log lines stay; the report counts from now on). In "
    "worker mode, this worker's pages reachable only through other workers' pages are not "
    "crawled again. To go back instead, stop the crawl and move the set-aside directory back "
    "(LMDB's mdb_dump may read what is left of it)."
)
#: what reading a damaged environment's pages raises while the frontier resumes
_STATE_ERRORS = (lmdb.Error, msgspec.DecodeError, struct.error, ValueError, IndexError,
                 OverflowError, KeyError)  # fmt: skip

#: reasons passed to the reject callback (they become crawl-log outcomes)
ROBOTS_DENIED = "robots-denied"
ROBOTS_UNAVAILABLE = "robots-unavailable"
HOST_UNREACHABLE = "host-unreachable"

_ALLOW_ALL = Rules("", None)
_NO_HOOKS = FrontierHooks()
_DONE = Settled(False, 0.0, False)  #: a response the host meant, holding it no longer


@dataclass(slots=True, frozen=True)
class HostSignals:
    """Hosts by state for the status (``Frontier.host_signals``)."""

    total: int  #: hosts with work queued or in flight (ready, snoozed, busy)
    ready: int  #: due now, waiting for a fetch slot
    waiting: int  #: snoozed on their politeness delay, Crawl-delay or a URL's retry time
    backoff: int  #: snoozed beyond that by Retry-After or error backoff
    robots: int  #: waiting for their robots.txt
    blocked: int  #: queued work held by an operator's block
    retired: int  #: given up (unreachable)
    #: the hosts held longest: (origin, "retry-after" or "backoff", seconds still held)
    worst: tuple[tuple[str, str, float], ...]
    #: the snoozed host due first: (origin, "delay", "crawl-delay", "retry", "retry-after" or
    #: "backoff", seconds until due); None if none is snoozed
    next_due: tuple[str, str, float] | None


def _resolved(base: str, url: str) -> str:
    """``url`` resolved against ``base`` ("" for one that does not parse)."""
    try:
        return urljoin(base, url)
    except ValueError:
        return ""


class Frontier:
    """Admission (scope, dedup, traps), per-host queues in LMDB, and politeness scheduling."""

    def __init__(
        self, state_dir: Path, options: FrontierOptions, hooks: FrontierHooks = _NO_HOOKS
    ) -> None:
        """A frontier over ``state_dir`` (created if need be), resumed from what an earlier
        run left there. ``options``: the tunables (``FrontierOptions.from_settings``);
        ``hooks``: the collaborators (rejected URLs, worker routing, the wall clock)."""
        o = options
        make_dir(state_dir, private=True)
        self._state_dir = state_dir
        self._snapshot_failing = False  #: the last checkpoint had no room for the snapshot
        check_identity(state_dir, o.seen_capacity, o.seen_error_rate)
        self._policy = o.policy
        self._retry_policy = o.retry_policy
        self._wall_clock = hooks.wall_clock
        self._obey_robots = o.obey_robots
        self._robots_retry_s = o.robots_retry_s
        self._robots_ttl_s = min(o.robots_ttl_s, MAX_ROBOTS_TTL_S)
        self._robots_stale_s = o.robots_stale_s
        #: hosts whose robots.txt is being fetched with only an out-of-date copy at hand: that
        #: copy, used if the fetch finds robots.txt unreachable (robots_done)
        self._stale: dict[str, Rules] = {}
        self._robots_attempts = o.robots_attempts
        self._sitemap_paths, self._sitemap_robots = o.sitemap_paths, o.sitemap_robots
        #: hosts whose rules came from the cache in this next_ready: their sitemaps to queue
        self._sitemaps_due: list[HostQueue] = []
        self._max_host_errors = o.max_host_errors
        self._host_error_urls = o.host_error_urls
        self._memory_urls = o.memory_urls
        self._per_ip = o.per_ip
        self._known_ips = dict(o.known_ips)
        self._groups: dict[str, IpGroup] = {}
        self._on_reject = hooks.on_reject
        env_path = self._env_path = state_dir / FRONTIER_ENV
        self._env: lmdb.Environment = open_checked_env(env_path, o.map_size, _FRESH_FRONTIER)
        try:
            self._store = QueueStore(self._env, self._host_id_of)
            self._seen = SeenSet(self._env, o.seen_capacity, o.seen_error_rate)
            self._blobs = self._env.open_db(b"blobs")
            self._outbox = self._env.open_db(b"outbox")
            #: the schedule of a continuous crawl (None: recrawl off, nothing of it runs)
            self._recrawl = (
                Recrawl(self._env, self._blobs, o.recrawl, hooks.wall_clock)
                if o.recrawl is not None
                else None
            )
        except lmdb.Error as exc:
            self._env.close()
            if storage_errno(exc) is not None:  # a full or failing disk, not damage
                raise storage_error(env_path, exc) from exc
            raise DamagedState(
                env_path, f"damaged LMDB environment ({exc})", _FRESH_FRONTIER
            ) from exc
        inbox = None
        try:
            inbox = Inbox(state_dir / INBOX_ENV, o.map_size) if hooks.route is not None else None
            robots = RobotsCache(
                state_dir / "robots",
                o.robots_token or product_token(o.user_agent),
                self._robots_ttl_s,
                o.robots_stale_s,
                hooks.wall_clock,
            )
        except DamagedState:
            if inbox is not None:
                inbox.close()
            self._env.close()
            raise
        #: batches from other workers (worker mode only: ``route`` given)
        self._inbox = inbox
        self._robots = robots
        self._txn: lmdb.Transaction[bytes] | None = None
        #: the host queues, where each waits, and how many are in each state (``hosts.py``)
        self._queues = HostQueues(o.connections_per_host)
        self._hosts: dict[str, HostQueue] = self._queues.hosts  #: origin -> queue (read only)
        self._heap_seq = 0  #: tie-breaker of the hosts' retry heaps
        #: scope, ownership, dedup and traps: which links become queued URLs
        self._admission = Admission(
            allow_domains=o.allow_domains,
            exclude=o.exclude,
            limits=o.limits,
            max_pages=o.max_pages,
            settled_links=o.settled_links,
            route=hooks.route,
            worker=hooks.worker,
            seen=self._seen,
            hosts=self._hosts,
            enqueue=self._enqueue,
            stored_admitted=self._stored_admitted,
            on_reject=hooks.on_reject,
            on_foreign=hooks.on_foreign,
        )
        #: hosts whose latest response held them beyond their politeness delay: origin ->
        #: (host, "retry-after" or "backoff"); pruned once they are due (``host_signals``)
        self._holding: dict[str, tuple[HostQueue, str]] = {}
        #: robots.txt redirect hops to hand out first (robots_redirect); their fetch is still
        #: counted in flight, as the host's robots.txt fetch
        self._robots_hops: deque[Ticket] = deque()
        self.robots_waiting = 0  #: hosts waiting for their robots.txt (nothing else issued)
        self.queued = 0  #: URLs admitted and not yet complete, in flight excluded
        self.in_flight = 0
        self.hot_total = 0
        self.admitted = 0  #: URLs admitted by this crawl, all runs (for crawl.max_pages)
        self._counted: dict[str, HostQueue] = {}  #: hosts whose admitted count this txn changed
        self.spilled = 0  #: URLs that went to LMDB only, past the memory budget
        #: a URL of a lower priority than 0 was loaded, or one of another priority queued: a
        #: new URL may sort before a host's in-memory boundary (``_enqueue``)
        self._ranked = False
        self.refilled = 0  #: URLs read back from LMDB into memory
        self.peak_hot = 0
        self.resumed = 0  #: URLs found queued in LMDB at start (an earlier run's work)
        #: host name -> (delay, policy) set by the operator (``set_host_delay``)
        self._host_delays: dict[str, tuple[float, DelayPolicy]] = {}
        if self._recrawl is not None:  # a ticket's completion also schedules its next visit
            self.mark_done = self._mark_done_scheduling  # type: ignore[method-assign]
        try:
            self._resume()
        except _STATE_ERRORS as exc:  # pages of the queue or seen-set unreadable
            self._close_state()
            raise DamagedState(env_path, f"damaged LMDB data ({exc!r})", _FRESH_FRONTIER) from exc

    @classmethod
    def from_settings(
        cls,
        s: CrawlSettings,
        state_dir: Path,
        on_reject: Callable[[Ticket, str], None] | None = None,
        *,
        route: Callable[[str], int] | None = None,
        worker: int = 0,
        on_foreign: Callable[[int, Link], None] | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> Frontier:
        """Build a frontier from the crawl settings (``FrontierOptions.from_settings`` is the
        only place that reads them)."""
        hooks = FrontierHooks(route=route, worker=worker, wall_clock=wall_clock)
        if on_reject is not None:
            hooks = replace(hooks, on_reject=on_reject)
        if on_foreign is not None:
            hooks = replace(hooks, on_foreign=on_foreign)
        return cls(state_dir, FrontierOptions.from_settings(s), hooks)

    # ----------------------------------------------------------------------------- transactions

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group every frontier change made inside into one LMDB write transaction.

        Each commit of a durable LMDB environment costs an fdatasync; the engine wraps one loop
        tick (a poll's results, the next tickets) in a batch so that cost is paid once per tick,
        not once per URL. An exception aborts the batch: LMDB keeps the state before it.
        """
        if self._txn is not None:
            yield
            return
        with self._transaction() as txn:
            self._txn = txn
            try:
                yield
            finally:
                self._txn = None

    @contextmanager
    def _write(self) -> Iterator[lmdb.Transaction[bytes]]:
        """The batch's transaction if one is open, else a transaction of its own."""
        if self._txn is not None:
            yield self._txn
        else:
            with self._transaction() as txn:
                yield txn

    @contextmanager
    def _transaction(self) -> Iterator[lmdb.Transaction[bytes]]:
        """A new write transaction: committed at the end, aborted by an exception. What the
        frontier learns only once a commit made it durable (settled links) is applied after."""
        try:
            with storage_errors(self._env_path), self._env.begin(write=True) as txn:
                yield txn
                self._store.flush(txn)
                self._seen.flush(txn)
                self._flush_counts(txn)
        except BaseException:
            self._admission.aborted()
            if self._recrawl is not None:
                self._recrawl.aborted()
            self._counted.clear()
            self._store.aborted()
            self._seen.aborted()
            if self._inbox is not None:
                self._inbox.release()  # their links were not committed: take them again
            raise
        self._store.committed()
        self._admission.committed()
        if self._recrawl is not None:
            self._recrawl.committed()
        if self._inbox is not None:
            self._inbox.ack()

    def save_blob(self, name: str, data: bytes) -> None:
        """Store a small named blob (e.g. the engine's counters) in the current transaction,
        so it is durable exactly when the frontier changes it goes with are."""
        with self._write() as txn:
            txn.put(name.encode(), data, db=self._blobs)

    def load_blob(self, name: str) -> bytes | None:
        """A blob saved by :meth:`save_blob` in this or an earlier run."""
        with self._env.begin(db=self._blobs) as txn:
            data = txn.get(name.encode())
        return bytes(data) if data is not None else None

    def queued_callbacks(self) -> dict[str, int]:
        """Queued (unfinished) URLs per spider callback name ("": the default), from one scan
        of the stored queue: for the start-up check of a changed spider (costly on a large
        queue: called only when a stored callback name is missing from the spider)."""
        with self._env.begin() as txn:
            return self._store.callback_counts(txn)

    # ----------------------------------------------------------------------------- admission

    def in_scope(self, url: str) -> bool:
        """Is a canonical URL inside the allowed domains and not excluded?"""
        return self._admission.in_scope(url)

    def in_scope_links(self, links: Sequence[str]) -> list[str]:
        """The canonical, in-scope forms of a page's links, deduplicated, in order (what a
        spider's callback sees; nothing is admitted: ``Admission.in_scope_links``)."""
        return self._admission.in_scope_links(links)

    def add(
        self,
        urls: Iterable[str],
        *,
        depth: int,
        referrer: str | None = None,
        hops: int = 0,
        now: float = 0.0,
        callback: str = "",
        meta: bytes = b"",
        priority: int = 0,
    ) -> int:
        """Admit new URLs (canonical, in scope, unseen, within the trap limits).

        ``callback``, ``meta``, ``priority``: a spider's request (``callback``: the name of the
        callback its response goes to, "" the default; ``meta`` msgpack), stored with each URL
        admitted, through retries and redirects (the engine passes them on) and to the owner
        of a host another worker owns. A URL already seen keeps what it was first admitted with.
        ``priority``: within its host, a higher priority is fetched sooner, FIFO among equal
        ones (clamped to +-65535, ``store.rank_of``); due retries still go first.

        Returns how many were queued. A new URL that breaks a trap limit is recorded through the
        reject callback once (it is marked seen, so later links to it are silent).

        Settled links. A link (as given, before canonicalisation) whose fate cannot change for
        the rest of the run is remembered in a bounded two-generation set once the transaction
        that decided it has committed, and later occurrences are skipped at the cost of one set
        lookup: links that are not crawlable or not in scope (pure functions of the link and
        the configuration), links another worker owns (sent in a committed outbox batch, which
        reaches the owner's seen-set; a repeat would only be a duplicate there), and links
        that went through the seen-set (committed there, and the seen database is
        append-only, so every later answer is "seen"). Until that commit they are not
        remembered, so an aborted transaction loses nothing. This is what makes the repeated
        navigation links of every page cheap. The one place a repeat is not a pure no-op,
        ``max_pages`` reached (the loop stops at the next owned link), bypasses the set.
        """
        request = (callback, meta, priority) if callback or meta or priority else None
        if self._txn is None:
            with self._transaction() as txn:
                return self._admit(txn, urls, depth, referrer, hops, now, request)
        return self._admit(self._txn, urls, depth, referrer, hops, now, request)

    def _admit(
        self,
        txn: lmdb.Transaction[bytes],
        urls: Iterable[str],
        depth: int,
        referrer: str | None,
        hops: int,
        now: float,
        request: tuple[str, bytes, int] | None = None,
    ) -> int:
        """:meth:`add` inside the transaction ``txn`` (``Admission.admit``)."""
        added = self._admission.admit(txn, urls, depth, referrer, hops, now, request, self.admitted)
        self.admitted += added
        return added

    def _enqueue(
        self, txn: lmdb.Transaction[bytes], host_key: str, entry: QueueEntry, now: float
    ) -> bool:
        """Queue an admitted URL in LMDB and, budget permitting, in memory; False if refused."""
        host = self._hosts.get(host_key)
        if host is None:
            host = self._new_host(host_key)
            if self._admission.limits.max_pages_per_host:
                host.admitted = self._stored_admitted(txn, host_key)
        elif host.state is HostState.RETIRED:
            self._on_reject(
                Ticket(b"", host_key, entry.url, entry.depth, entry.hops, 0, entry.referrer),
                host.retired,
            )
            return False
        if host.hid < 0:
            host.hid = self._store.host_id(txn, host_key)
        rank = DEFAULT_RANK
        if entry.priority:
            rank = rank_of(entry.priority)
            self._ranked = True
        # sorts before URLs held in memory (never, while every URL queued has priority 0)
        ahead = self._ranked and (upto := host.loaded_upto) is not None and rank < key_rank(upto)
        hot = not ahead and host.unloaded == 0 and self.hot_total < self._memory_urls
        key = self._store.add(txn, host.hid, host_key, rank, entry, hot or ahead)
        self.queued += 1
        host.admitted += 1
        if self._admission.limits.max_pages_per_host:
            self._counted[host_key] = host
        if ahead:
            self._hold_ahead(host, key, entry)
        elif hot:
            if host.hot is None:
                host.hot = deque()
            host.hot.append((key, entry))
            host.loaded_upto = key
            self._hot_changed(1)
        else:
            host.unloaded += 1
            self.spilled += 1
        if host.state in (HostState.EMPTY, HostState.BUSY):
            self._queues.settle(host, now)
        return True

    def _hold_ahead(self, host: HostQueue, key: bytes, entry: QueueEntry) -> None:
        """Hold in memory, in key order, a URL whose key sorts before the host's in-memory
        boundary ``loaded_upto`` (a higher priority than URLs already loaded): every unfinished
        entry up to the boundary is held and every one after it is in LMDB, so it may not wait
        there. Over the memory budget, the host's last entry in memory goes back to LMDB (the
        boundary moves to just before it; ``read_after`` skips what is still held past it)."""
        hot = host.hot
        if hot is None:
            hot = host.hot = deque()
        hot.insert(bisect.bisect(hot, key, key=_ENTRY_KEY), (key, entry))
        self._hot_changed(1)
        if self.hot_total > self._memory_urls and self._store.release(last := hot[-1][0]):
            hot.pop()
            if not hot:
                host.hot = None
            self._hot_changed(-1)
            host.loaded_upto = key_before(last)
            host.unloaded += 1
            self.spilled += 1

    def _host_id_of(self, host_key: str) -> int:
        """The store's id of a host (-1 if it has none yet): referrers are stored by it."""
        host = self._hosts.get(host_key)
        return host.hid if host is not None else -1

    def _new_host(self, host_key: str) -> HostQueue:
        host = self._queues.add(HostQueue(host_key))
        if self._per_ip:
            ip = self._known_ips.get(host_of(host_key))
            if ip is not None:
                host.group = self._groups.setdefault(ip, IpGroup())
        return host

    def _stored_admitted(self, txn: lmdb.Transaction[bytes], host_key: str) -> int:
        """URLs of ``host_key`` admitted by earlier runs (kept only with max_pages_per_host)."""
        raw = txn.get(_ADMITTED_PREFIX + host_key.encode(), db=self._blobs)
        return int.from_bytes(raw, "big") if raw is not None else 0

    def _flush_counts(self, txn: lmdb.Transaction[bytes]) -> None:
        """Write the admission counts the limits need, in the transaction that changed them:
        a resumed crawl then neither restarts crawl.max_pages nor max_pages_per_host (per-host
        counts are kept only while max_pages_per_host is set)."""
        blobs = self._blobs
        txn.put(_ADMITTED_KEY, self.admitted.to_bytes(8, "big"), db=blobs)
        for host_key, host in self._counted.items():
            count = host.admitted.to_bytes(8, "big")
            txn.put(_ADMITTED_PREFIX + host_key.encode(), count, db=blobs)
        self._counted.clear()
        if self._recrawl is not None:
            self._recrawl.flush(txn)

    def _hot_changed(self, delta: int) -> None:
        self.hot_total += delta
        if self.hot_total > self.peak_hot:
            self.peak_hot = self.hot_total

    def ingest_inbox(self, now: float, run_id: bytes = b"", limit: int = 64) -> tuple[int, int]:
        """Admit link batches other workers delivered into this worker's inbox.

        The links are admitted in the current (batch) transaction; the batches leave the inbox
        once it has committed (``frontier/mailbox.py``). Returns the number of batches
        ingested, and how many of them were delivered during run ``run_id`` (the termination
        count of ``frontier_crawl.workers``). Nothing to do outside worker mode.
        """
        if self._inbox is None:
            return 0, 0
        with self.batch():
            batches = self._inbox.take(limit)
            for _key, value in batches:
                for url, depth, referrer, hops, callback, meta, priority in decode_links(value):
                    self.add((url,), depth=depth, referrer=referrer, hops=hops, now=now,
                             callback=callback, meta=meta, priority=priority)  # fmt: skip
        return len(batches), sum(key.startswith(run_id) for key, _ in batches)

    def queue_outgoing(self, dest: int, links: list[Link]) -> None:
        """Keep a batch for another worker in this frontier's outbox, in the current transaction.

        Delivery (:meth:`outgoing` / :meth:`delivered`) happens after the commit, never inside
        a transaction of ours: holding our writer lock while waiting for a peer's (which may be
        waiting for ours) would deadlock. A kill between commit and delivery only delays it.
        """
        with self._write() as txn:
            txn.put(dest.to_bytes(2, "big") + os.urandom(14), encode_links(links), db=self._outbox)

    def outgoing(self, limit: int = 256) -> list[tuple[bytes, int, bytes]]:
        """Committed batches not yet delivered: (key, destination worker, encoded links)."""
        with self._env.begin(db=self._outbox) as txn:
            out = []
            for key, value in txn.cursor():
                out.append((bytes(key), int.from_bytes(key[:2], "big"), bytes(value)))
                if len(out) >= limit:
                    break
        return out

    def delivered(self, keys: Iterable[bytes]) -> None:
        """Forget outbox batches now committed into their destinations' inboxes."""
        with self._write() as txn:
            for key in keys:
                txn.delete(key, db=self._outbox)

    # ----------------------------------------------------------------------------- scheduling

    def next_wake(self) -> float | None:
        """Monotonic time at which a snoozed host, or the next revisit of a continuous crawl,
        becomes due (None if no host is snoozed and no revisit is scheduled)."""
        host = self._queues.first_snoozed()
        wake = host.wake_at if host is not None else None
        if self._recrawl is not None:
            due = self._recrawl.next_due()
            if due is not None:
                at = time.monotonic() + max(0.0, due - self._wall_clock())
                wake = at if wake is None else min(wake, at)
        return wake

    @property
    def has_ready(self) -> bool:
        """Is any host ready right now (as of the last next_ready call), or a robots.txt
        redirect hop waiting to be handed out?"""
        return self._queues.has_ready or bool(self._robots_hops)

    def next_ready(self, now: float, limit: int) -> list[Ticket]:
        """Up to ``limit`` tickets from hosts whose politeness slot is open at ``now``."""
        queues = self._queues
        if self._recrawl is not None:
            self._pump_revisits(now)
        queues.wake(now)
        out: list[Ticket] = []
        hops = self._robots_hops
        while hops and len(out) < limit:  # the rest of a robots.txt fetch: in flight already
            out.append(hops.popleft())
        while len(out) < limit:
            host = queues.take_ready()  # BUSY now; settled again below
            if host is None:
                break
            if host.group is not None and self._group_holds(host, now):
                continue
            ticket = self._take(host, now)
            if ticket is not None:
                out.append(ticket)
                self.in_flight += 1
                group = host.group
                if group is not None:
                    group.in_flight += 1
                if not ticket.robots or host.rules is not None:
                    # a page or a refresh of robots.txt: the delay is a rate, it spaces starts
                    host.starts += not ticket.robots
                    host.last_start = now
                    host.next_at = max(host.next_at, now + self._spacing(host))
                    if group is not None:
                        group.next_at = max(group.next_at, host.next_at)
            self._queues.settle(host, now)
        while self._sitemaps_due:
            host = self._sitemaps_due.pop()
            self._queue_sitemaps(host, host.rules, now)
        return out

    def _spacing(self, host: HostQueue) -> float:
        """The least time from this request's start to the host's next one: the delay of its
        latest response, never below min_delay_s and the Crawl-delay (an operator's delay for
        the host replaces min_delay_s and the adaptive delay, never the Crawl-delay)."""
        crawl_delay = host.rules.crawl_delay_s if host.rules is not None else None
        if self._host_delays:
            own = self._host_delays.get(host_of(host.origin))
            if own is not None:
                return delay_for(0.0, crawl_delay, own[1])
        return max(host.delay_s, delay_for(0.0, crawl_delay, self._policy))

    def _policy_of(self, host: HostQueue) -> DelayPolicy:
        if self._host_delays:
            own = self._host_delays.get(host_of(host.origin))
            if own is not None:
                return own[1]
        return self._policy

    def _group_holds(self, host: HostQueue, now: float) -> bool:
        """Per-IP politeness: park or snooze a host whose IP group is busy or not yet due."""
        group = host.group
        assert group is not None
        if group.in_flight >= self._queues.connections_per_host:
            if group.waiting is None:
                group.waiting = []
            group.waiting.append(host)  # BUSY until a request to this IP completes
            return True
        if group.next_at > now:
            host.next_at = max(host.next_at, group.next_at)
            self._queues.settle(host, now)
            return True
        return False

    def _take(self, host: HostQueue, now: float) -> Ticket | None:
        """The host's next ticket: robots.txt first, then a retry that is due, then its queue;
        robots-denied URLs are recorded and skipped."""
        if host.rules is None:
            host.rules = self._cached_rules(host, now) if self._obey_robots else _ALLOW_ALL
            if host.rules is not None and (self._sitemap_paths or self._sitemap_robots):
                self._sitemaps_due.append(host)  # queued once next_ready is done with hosts
        if host.rules is None:  # nothing else until robots.txt is known
            host.robots_in_flight = True
            self.robots_waiting += 1
            return Ticket(b"", host.origin, host.origin + "/robots.txt", 0, robots=True)
        if host.rules.refresh_at <= now:  # fetched again in this request slot; the host's
            host.rules.refresh_at = float("inf")  # other slots go on with these rules meanwhile
            host.in_flight += 1
            return Ticket(b"", host.origin, host.origin + "/robots.txt", 0, robots=True)
        revisits = host.revisits
        if revisits is not None and self._revisit_turn(host, revisits, now):
            revisit = self._take_revisit(host, revisits, now)
            if revisit is not None:
                return revisit
        while (item := self._pop(host, now)) is not None:
            key, entry = item
            self.queued -= 1
            ticket = (
                Ticket(key, host.origin, entry.url, entry.depth, entry.hops, entry.attempt,
                       entry.referrer)
                if not (entry.callback or entry.meta or entry.priority)
                else Ticket(key, host.origin, entry.url, entry.depth, entry.hops, entry.attempt,
                            entry.referrer, False, entry.callback, entry.meta, entry.priority)
            )  # fmt: skip
            if host.rules.allowed(entry.url):
                host.in_flight += 1
                return ticket
            self._on_reject(ticket, ROBOTS_DENIED)
            with self._write():
                self._store.done(key)
        revisits = host.revisits
        if revisits is not None and revisits.ready_at() <= now:  # nothing new: revisits go
            return self._take_revisit(host, revisits, now)
        return None

    def _cached_rules(self, host: HostQueue, now: float) -> Rules | None:
        """The host's rules from the disk cache if they are fresh; None if robots.txt must be
        fetched first (an out-of-date copy is kept in ``_stale`` as that fetch's fallback)."""
        hit = self._robots.get(host.origin)
        if hit is None:
            return None
        rules, age = hit
        self._time_rules(rules, now - age)
        if age < self._robots_ttl_s:
            return rules
        if rules.usable_until > now:
            self._stale[host.origin] = rules
        return None

    def _time_rules(self, rules: Rules, fetched: float) -> None:
        """Set when rules fetched at (monotonic) ``fetched`` are due again, and until when
        they may stand in for an unreachable robots.txt."""
        rules.refresh_at = fetched + self._robots_ttl_s
        rules.usable_until = rules.refresh_at + self._robots_stale_s

    def _pop(self, host: HostQueue, now: float) -> tuple[bytes, QueueEntry] | None:
        """The host's next entry in memory (a due retry first), refilled from LMDB if need be."""
        retries = host.retries
        if (
            retries
            and retries[0][0] <= now
            and (
                (host.starts >= retries[0][4] and not host.took_retry)
                or not (host.hot or host.unloaded)
            )
        ):
            key, entry = heapq.heappop(retries)[2:4]
            if not retries:
                host.retries = None
            self._hot_changed(-1)
            host.took_retry = True
            return key, entry
        host.took_retry = False
        if not host.hot:
            if host.unloaded:
                self._refill(host)
            if not host.hot:
                host.hot = None
                return None if not retries or retries[0][0] > now else self._pop(host, now)
        item = host.hot.popleft()
        if not host.hot:
            host.hot = None
        self._hot_changed(-1)
        return item

    def _refill(self, host: HostQueue) -> None:
        room = min(max(1, min(REFILL_BATCH, self._memory_urls - self.hot_total)), host.unloaded)
        if self._txn is not None:  # the usual case (inside a batch): no context manager
            batch = self._store.read_after(self._txn, host.hid, host.origin, host.loaded_upto, room)
        else:
            with self._write() as txn:
                batch = self._store.read_after(txn, host.hid, host.origin, host.loaded_upto, room)
        if not batch:  # LMDB and the counters disagree: trust LMDB
            log.error(
                "host %s: %d entries expected in LMDB, none found", host.origin, host.unloaded
            )
            self.queued -= host.unloaded
            host.unloaded = 0
            return
        if host.hot is None:
            host.hot = deque()
        host.hot.extend(batch)
        host.loaded_upto = batch[-1][0]
        if key_rank(host.loaded_upto) > DEFAULT_RANK:  # a lower priority than 0 (``_enqueue``)
            self._ranked = True
        host.unloaded -= len(batch)
        self.refilled += len(batch)
        self._hot_changed(len(batch))

    # ----------------------------------------------------------------------------- completion

    def complete(self, ticket: Ticket, outcome: Completion, *, mark_done: bool = True) -> Settled:
        """A page ticket's fetch came back with ``outcome`` (its facts): the frontier decides.

        A transient failure with retries left (``completion.retry_in``) goes back into its
        host's retry heap (:meth:`retry`); anything else is finished (:meth:`finish`). A
        429/503's Retry-After holds the host (capped at fetch.max_retry_delay_s; a longer one
        is not retried). Connection failures, 429/503 and runs of failing URLs back the host
        off (``_delay_after``). ``mark_done``: as for :meth:`finish` (a retry is never done).
        """
        status = outcome.status
        if outcome.error is None and status < 500 and status != 429:
            # the common case, as the policy below decides it: finished, no failure, no hold
            # (finish, inlined: one call less per page)
            host = self._hosts[ticket.origin]
            if self._recrawl is not None:
                self._recrawl.stage(ticket, outcome)
            if mark_done:
                self.mark_done((ticket.key,))
            polite, backoff = self._delay_after(host, ticket, outcome.duration_s, Failure.NONE)
            held = self._release(host, ticket, outcome.finished, polite, backoff, 0.0, outcome.ip)
            return _DONE if held == 0.0 else Settled(False, held, False)
        policy = self._retry_policy
        after = (
            retry_after_s(status, outcome.retry_after, self._wall_clock())
            if status in HOST_STATUSES
            else None
        )
        failure = failure_of(outcome)
        retry_s = retry_in(outcome, ticket.attempt, after, policy)
        if retry_s is not None:
            held = self.retry(ticket, outcome.finished, retry_s, answer_s(outcome), failure,
                              outcome.ip, hold_s=after or 0.0)  # fmt: skip
            return Settled(True, held, failure is not Failure.NONE)
        if self._recrawl is not None:
            self._recrawl.stage(ticket, outcome)
        held = self.finish(ticket, outcome.finished, answer_s(outcome), failure, outcome.ip,
                           mark_done=mark_done, hold_s=hold_for(after, policy))  # fmt: skip
        return Settled(False, held, failure is not Failure.NONE)

    def will_retry(self, ticket: Ticket, outcome: Completion) -> bool:
        """Would :meth:`complete` retry this ticket (nothing changes)? The engine asks first
        when a final result needs work (archiving, links) before it is completed."""
        if outcome.error is None and outcome.status < 500 and outcome.status != 429:
            return False  # the common case: no retry, no Retry-After to read
        after = (
            retry_after_s(outcome.status, outcome.retry_after, self._wall_clock())
            if outcome.status in HOST_STATUSES
            else None
        )
        return retry_in(outcome, ticket.attempt, after, self._retry_policy) is not None

    def finish(
        self,
        ticket: Ticket,
        now: float,
        fetch_s: float = 0.0,
        failure: Failure = Failure.NONE,
        ip: str = "",
        *,
        mark_done: bool = True,
        hold_s: float = 0.0,
    ) -> float:
        """A page ticket is finished for good (fetched, or failed for the last time): the
        mechanism under :meth:`complete`, which decides ``failure`` and ``hold_s`` from a
        result's facts.

        ``mark_done=False``: the host is released now, but the URL's entry stays unfinished
        until :meth:`mark_done` is given its ``ticket.key`` (the engine does that once the
        page's WARC record is on its way to disk). Until then a kill makes it fetched again.
        ``hold_s``: hold the host this long from now (a 429/503's Retry-After). Returns how long
        this response holds the host beyond its politeness delay (backoff or ``hold_s``).
        """
        host = self._hosts[ticket.origin]
        if mark_done:
            self.mark_done((ticket.key,))
        held = self._release(host, ticket, now, *self._delay_after(host, ticket, fetch_s, failure),
                             hold_s, ip)  # fmt: skip
        self._maybe_retire(host, failure)
        return held

    def mark_done(self, keys: Iterable[bytes]) -> None:
        """Record completed tickets' entries as finished (durable at the next commit)."""
        if self._txn is not None:  # the usual case (the engine's group): no context manager
            for key in keys:
                self._store.done(key)
        else:
            with self._write():
                for key in keys:
                    self._store.done(key)

    def retry(
        self,
        ticket: Ticket,
        now: float,
        delay_s: float,
        fetch_s: float = 0.0,
        failure: Failure = Failure.NONE,
        ip: str = "",
        *,
        hold_s: float = 0.0,
    ) -> float:
        """Fetch this ticket again, no earlier than ``delay_s`` from now (the mechanism under
        :meth:`complete`, which decides the delay from a result's facts).

        The URL waits in its host's retry heap for its own time, and then until another of the
        host's queued URLs has started, so the healthy ones go on at the host's usual pace; the
        host itself is held only by host-wide trouble (see :meth:`finish`, whose return value
        this returns too).
        """
        host = self._hosts[ticket.origin]
        if ticket.last is not None and self._recrawl is not None:
            self._retry_revisit(host, ticket, now + delay_s)
            held = self._release(
                host, ticket, now, *self._delay_after(host, ticket, fetch_s, failure), hold_s, ip
            )
            self._maybe_retire(host, failure)
            return held
        entry = QueueEntry(
            ticket.url, ticket.depth, ticket.hops, ticket.attempt + 1, ticket.referrer,
            ticket.callback, ticket.meta, ticket.priority,
        )  # fmt: skip
        with self._write() as txn:
            self._store.rewrite(txn, ticket.key, entry)
        if host.retries is None:
            host.retries = []
        self._heap_seq += 1
        due = (now + delay_s, self._heap_seq, ticket.key, entry, host.starts + 1)
        heapq.heappush(host.retries, due)
        self._hot_changed(1)
        self.queued += 1
        held = self._release(host, ticket, now, *self._delay_after(host, ticket, fetch_s, failure),
                             hold_s, ip)  # fmt: skip
        self._maybe_retire(host, failure)
        return held

    def _delay_after(
        self, host: HostQueue, ticket: Ticket, fetch_s: float, failure: Failure
    ) -> tuple[float, float]:
        """(politeness delay, host backoff) after a response; counts the host's errors.

        Only host-wide signals back the host off: 429/503, connection failures, or failures of
        ``host_error_urls`` distinct URLs in a row (each such run counts as one signal, then
        the count starts again). One URL failing again and again does not.
        """
        host_wide = failure is Failure.SERVER or failure is Failure.CONNECTION
        if failure is Failure.NONE:
            host.errors = host.conn_errors = 0
            host.failing = None
        elif failure is Failure.URL:
            if host.failing is None:
                host.failing = set()
            host.failing.add(ticket.key or ticket.url.encode())
            if len(host.failing) >= self._host_error_urls:
                host.failing = None
                host.errors += 1
                host_wide = True
        else:
            host.errors += 1
            host.conn_errors = host.conn_errors + 1 if failure is Failure.CONNECTION else 0
        crawl_delay = host.rules.crawl_delay_s if host.rules is not None else None
        polite = delay_for(fetch_s, crawl_delay, self._policy_of(host))
        return polite, host_backoff(host.errors, self._policy) if host_wide else 0.0

    def _maybe_retire(self, host: HostQueue, failure: Failure) -> None:
        if (
            failure is Failure.CONNECTION
            and self._max_host_errors
            and host.conn_errors >= self._max_host_errors
            and host.state is not HostState.RETIRED
        ):
            log.warning("%s: %d connection failures in a row: host retired", host.origin,
                        host.conn_errors)  # fmt: skip
            self._retire(host, HOST_UNREACHABLE)

    def robots_redirect(self, ticket: Ticket, target: str) -> bool:
        """robots.txt (``ticket``) answered with a redirect to ``target``: fetch that next, for
        the same host (which goes on waiting), if it is crawlable and inside the allowed
        domains; the hop comes out of the next :meth:`next_ready` first. False when it is not
        (nothing changes: the caller finishes the fetch with :meth:`robots_done`). The
        ``exclude`` patterns are not applied: they select pages, and robots.txt is none."""
        url = canonicalize(target)
        if url is None or not self._admission.domain_allowed(host_of(url)):
            return False
        self._robots_hops.append(Ticket(b"", ticket.origin, url, 0, ticket.hops + 1, robots=True))
        return True

    def retire(self, origin: str, reason: str) -> None:
        """Give up on a host for the rest of the run: its queued URLs, and those found later,
        are recorded with ``reason`` (requests in flight come back as usual)."""
        host = self._hosts.get(origin)
        if host is not None and host.state is not HostState.RETIRED:
            log.warning("%s: host retired (%s)", origin, reason)
            self._retire(host, reason)

    def robots_done(
        self,
        ticket: Ticket,
        now: float,
        status: int,
        body: bytes,
        fetch_s: float = 0.0,
        ip: str = "",
        *,
        retry_after: str | None = None,
        retire: str = "",
    ) -> None:
        """Record a robots.txt fetch (``status`` 0: no response; ``retry_after``: the
        response's Retry-After header, which holds the host after a 429/503, capped at
        fetch.max_retry_delay_s): new rules, or, robots.txt being unreachable, the copy at
        hand while it is usable (robots_stale_s), else a retry later, or the host retired.

        The fetch was either the host's first (nothing else was issued meanwhile) or a refresh
        (it took one of the host's request slots; the others went on with the old rules).
        ``retire``: the host is given up at once with this reason (its address is refused).
        """
        host = self._hosts[ticket.origin]
        hold = (
            hold_for(retry_after_s(status, retry_after, self._wall_clock()), self._retry_policy)
            if retry_after and status in HOST_STATUSES
            else 0.0
        )
        refresh = not host.robots_in_flight
        host.robots_in_flight = False
        self.robots_waiting -= not refresh
        fallback = host.rules if refresh else self._stale.pop(host.origin, None)
        if retire:
            self._release(host, ticket if refresh else None, now, 0.0, 0.0, 0.0, ip)
            if host.state is not HostState.RETIRED:
                log.warning("%s: host retired (%s)", host.origin, retire)
                self._retire(host, retire)
            return
        rules = self._robots.store(host.origin, status, body) if self._obey_robots else None
        mine = ticket if refresh else None  # a refresh counted in the host's in_flight
        if rules is not None:
            host.robots_attempts = 0
            self._time_rules(rules, now)
            host.rules = rules
            delay, retry = delay_for(fetch_s, rules.crawl_delay_s, self._policy), 0.0
        else:
            host.robots_attempts += 1
            retry = max(self._robots_retry_s * 2 ** (host.robots_attempts - 1), hold)
            if fallback is not None and fallback.usable_until > now:
                # RFC 9309 2.4: crawl on with the copy fetched earlier, fetch again later
                fallback.refresh_at = now + retry
                if host.rules is not fallback:
                    age = self._robots.clock() - fallback.fetched_at
                    log.warning("robots.txt of %s unreachable: using the copy fetched %.0f s "
                                "ago", host.origin, age)  # fmt: skip
                host.rules = fallback
                delay, retry = delay_for(fetch_s, fallback.crawl_delay_s, self._policy), hold
            else:
                host.rules = None  # no usable copy: nothing is fetched until robots.txt answers
                if host.robots_attempts >= self._robots_attempts:
                    log.warning("robots.txt of %s unavailable: host retired", host.origin)
                    self._release(host, mine, now, 0.0, 0.0, 0.0, ip)
                    self._retire(host, ROBOTS_UNAVAILABLE)
                    return
                delay = delay_for(fetch_s, None, self._policy)
        self._release(host, mine, now, delay, retry, 0.0, ip)
        if rules is not None and (self._sitemap_paths or self._sitemap_robots):
            self._queue_sitemaps(host, rules, now)

    def _queue_sitemaps(self, host: HostQueue, rules: Rules | None, now: float) -> None:
        """``[sitemaps]``: the host's sitemaps admitted like any URL (scope, so a ``Sitemap:``
        line naming another host counts only if that host is in scope; the seen-set, so each
        is fetched once however often its robots.txt is read; robots.txt; politeness), with
        callback SITEMAP_CALLBACK at depth 0: ``Sitemap:`` lines of robots.txt (relative
        ones resolved against it), then the configured paths."""
        robots_url = host.origin + "/robots.txt"
        if self._sitemap_robots and rules is not None and rules.sitemaps:
            found = [url for line in rules.sitemaps if (url := _resolved(robots_url, line))]
            self.add(found, depth=0, referrer=robots_url, now=now, callback=SITEMAP_CALLBACK)
        if self._sitemap_paths:
            paths = [host.origin + path for path in self._sitemap_paths]
            self.add(paths, depth=0, now=now, callback=SITEMAP_CALLBACK)

    def _release(
        self,
        host: HostQueue,
        ticket: Ticket | None,
        now: float,
        delay: float,
        backoff: float,
        hold: float,
        ip: str,
    ) -> float:
        """A request of ``host`` ended at ``now``: free its connection and move its wake time.

        ``delay`` spaces request starts (from the end of this response, too, with one connection
        per host, and always after robots.txt); ``backoff`` and ``hold`` run from the end of this
        response. Returns how long they hold the host beyond ``delay``.
        """
        if ticket is not None:
            host.in_flight -= 1
        self.in_flight -= 1
        host.delay_s = delay
        after_end = ticket is None or self._queues.connections_per_host == 1
        polite = max(host.next_at, (now if after_end else host.last_start) + delay)
        host.next_at = max(polite, now + backoff, now + hold)
        group = host.group
        if group is not None:
            group.in_flight -= 1
            group.next_at = max(group.next_at, host.next_at)
            waiting, group.waiting = group.waiting, None
            for other in waiting or ():
                if other.state is HostState.BUSY:
                    self._queues.settle(other, now)
        elif self._per_ip and ip:
            # joins its IP's group now: the requests it still has in flight count there from now
            # on (they are subtracted when they end), this one never was
            host.group = self._groups.setdefault(ip, IpGroup())
            host.group.in_flight += host.in_flight + host.robots_in_flight
            host.group.next_at = max(host.group.next_at, host.next_at)
        if host.state is not HostState.READY:
            self._queues.settle(host, now)
        held = host.next_at - polite
        if held > 0:
            self._holding[host.origin] = (host, "retry-after" if hold > backoff else "backoff")
        elif self._holding:
            self._holding.pop(host.origin, None)
        return held

    def _retire(self, host: HostQueue, reason: str) -> None:
        """Give up on a host: every queued URL is recorded as failed with ``reason``."""
        self._queues.move(host, HostState.RETIRED)
        host.retired = reason
        self._holding.pop(host.origin, None)
        with self.batch(), self._write() as txn:
            while host.hot or host.unloaded:
                if not host.hot:
                    self._refill(host)  # reads through the same (batch) transaction
                    if not host.hot:
                        break
                for key, entry in host.hot:
                    self.queued -= 1
                    self._reject_entry(txn, host, key, entry, reason)
                self._hot_changed(-len(host.hot))
                host.hot = None
            for _due, _seq, key, entry, _starts in host.retries or ():
                self.queued -= 1
                self._hot_changed(-1)
                self._reject_entry(txn, host, key, entry, reason)
            host.retries = None
            revisits, host.revisits = host.revisits, None
            if revisits is not None and self._recrawl is not None:  # due again after a while
                for _ready, key, _attempt, visit in revisits.heap:
                    self._recrawl.put_back(txn, visit, key[8:])

    def _reject_entry(
        self,
        txn: lmdb.Transaction[bytes],
        host: HostQueue,
        key: bytes,
        entry: QueueEntry,
        reason: str,
    ) -> None:
        ticket = Ticket(key, host.origin, entry.url, entry.depth, entry.hops, entry.attempt,
                        entry.referrer, False, entry.callback, entry.meta,
                        entry.priority)  # fmt: skip
        self._on_reject(ticket, reason)
        self._store.done(key)

    # ----------------------------------------------------------------------------- revisits

    @property
    def continuous(self) -> bool:
        """A continuous crawl (``[recrawl] enabled``): it never ends by itself."""
        return self._recrawl is not None

    def _mark_done_scheduling(self, keys: Iterable[bytes]) -> None:
        """:meth:`mark_done` of a continuous crawl: each ticket's next visit, staged by
        :meth:`complete`, is written in the same transaction as its entry's done mark."""
        recrawl = self._recrawl
        assert recrawl is not None
        with self._write() as txn:
            for key in keys:
                if len(key) != DUE_KEY_LEN:  # a revisit has no queue entry
                    self._store.done(key)
                recrawl.apply(txn, key)

    def _pump_revisits(self, now: float) -> None:
        """Load the revisits that came due into their hosts' queues (a bounded number)."""
        recrawl = self._recrawl
        assert recrawl is not None
        wall = self._wall_clock()
        if not recrawl.wants_pump(wall):
            return
        with self._write() as txn:
            for key, visit in recrawl.due_batch(txn, wall):
                if not self._admission.in_scope(visit.url):  # a reloaded scope left it out
                    recrawl.forget(txn, key[8:])
                    continue
                host_key = origin(visit.url)
                host = self._hosts.get(host_key)
                if host is None:
                    host = self._new_host(host_key)
                    if self._admission.limits.max_pages_per_host:  # as _enqueue counts it
                        host.admitted = self._stored_admitted(txn, host_key)
                if host.state is HostState.RETIRED:
                    recrawl.put_back(txn, visit, key[8:])
                    continue
                if host.revisits is None:
                    host.revisits = HostRevisits()
                host.revisits.push(0.0, key, 0, visit)
                if host.state in (HostState.EMPTY, HostState.BUSY):
                    self._queues.settle(host, now)

    def _revisit_turn(self, host: HostQueue, revisits: HostRevisits, now: float) -> bool:
        """Does the host's next request go to a revisit (one is ready)? Always when it has no
        new URL in memory or LMDB; else as ``revisit_share`` says."""
        if revisits.ready_at() > now:
            return False
        if not (host.hot or host.unloaded):
            return True
        recrawl = self._recrawl
        assert recrawl is not None
        return revisits.turn(recrawl.policy.revisit_share)

    def _take_revisit(self, host: HostQueue, revisits: HostRevisits, now: float) -> Ticket | None:
        """The host's first ready revisit as a ticket (its ``key`` the due key, its ``last``
        the previous captures); one robots.txt now denies is recorded and put back."""
        recrawl = self._recrawl
        assert recrawl is not None and host.rules is not None
        heap = revisits.heap
        out = None
        while heap and heap[0][0] <= now:
            _ready, key, attempt, visit = heapq.heappop(heap)
            ticket = Ticket(key, host.origin, visit.url, visit.depth, 0, attempt, visit.referrer,
                            False, visit.callback, visit.meta, visit.priority,
                            visit.last())  # fmt: skip
            if host.rules.allowed(visit.url):
                host.in_flight += 1
                recrawl.take(key, visit, attempt)
                out = ticket
                break
            self._on_reject(ticket, ROBOTS_DENIED)
            with self._write() as txn:
                recrawl.put_back(txn, visit, key[8:])
        if not heap:
            host.revisits = None
        return out

    def _retry_revisit(self, host: HostQueue, ticket: Ticket, at: float) -> None:
        """A revisit failed transiently with retries left: again at monotonic time ``at``."""
        recrawl = self._recrawl
        assert recrawl is not None
        visit = recrawl.flying.pop(ticket.key, None)
        if visit is None:
            return
        if host.revisits is None:
            host.revisits = HostRevisits()
        host.revisits.push(at, ticket.key, ticket.attempt + 1, visit)

    def freshness(self, now_wall: float) -> dict[str, object]:
        """The schedule's figures (RECRAWL.md's ``freshness`` dict without ``per_hour``, which
        observe computes from the visit totals); ``{"enabled": False}`` without recrawl. Counts
        due keys up to a cap: call it every few seconds, not per tick."""
        if self._recrawl is None:
            return {"enabled": False}
        if self._txn is not None:
            return self._recrawl.freshness(self._txn, now_wall)
        with self._env.begin() as txn:
            return self._recrawl.freshness(txn, now_wall)

    def sitemap_lastmod(self, pairs: Iterable[tuple[str, float]]) -> int:
        """A sitemap's ``(<loc>, <lastmod> epoch seconds)`` pairs: each scheduled URL whose last
        capture is older than its lastmod becomes due now. Returns how many did (0 without
        recrawl; URLs that do not canonicalise or are not scheduled are skipped)."""
        recrawl = self._recrawl
        if recrawl is None:
            return 0
        made = 0
        with self._write() as txn:
            for url, lastmod in pairs:
                canonical = canonicalize(url)
                if canonical is not None:
                    made += recrawl.make_due(txn, canonical, lastmod)
        return made

    # ----------------------------------------------------------------------------- operator

    @property
    def blocked_hosts(self) -> list[str]:
        """Host names the operator blocked (``block``), sorted."""
        return sorted(self._queues.blocked)

    @property
    def host_delays(self) -> dict[str, float]:
        """Host name -> the delay the operator set for it (``set_host_delay``)."""
        return {name: delay for name, (delay, _p) in sorted(self._host_delays.items())}

    @property
    def held_by_blocks(self) -> int:
        """URLs queued for blocked hosts (not handed out until unblocked)."""
        return sum(host.queued for host in self._queues.parked.values())

    @property
    def blocked_queues(self) -> int:
        """Hosts with queued work held by a block."""
        return len(self._queues.parked)

    def _matching(self, name: str) -> list[HostQueue]:
        """Every known host (origin) whose host name is ``name``: O(hosts), for commands."""
        return [host for key, host in self._hosts.items() if host_of(key) == name]

    def block(self, name: str, now: float) -> int:
        """Hand out no more URLs of host name ``name`` (every scheme and port) until
        :meth:`unblock`: its queued and newly admitted URLs are kept (in LMDB, as always),
        requests in flight finish. Durable with the open transaction. Returns the URLs held."""
        self._queues.blocked.add(name)
        self._save_control()
        held = 0
        for host in self._matching(name):
            if host.state in (HostState.READY, HostState.SNOOZED):
                self._queues.move(host, HostState.BLOCKED)  # its FIFO or heap entry is stale
            held += host.queued
        return held

    def unblock(self, name: str, now: float) -> int:
        """Undo :meth:`block`; the host's URLs are handed out again. Returns how many are
        queued (0 and no change if ``name`` was not blocked)."""
        blocked = self._queues.blocked
        if name not in blocked:
            return 0
        blocked.discard(name)
        self._save_control()
        released = 0
        for host in [h for h in self._queues.parked.values() if host_of(h.origin) == name]:
            released += host.queued
            self._queues.settle(host, now)
        return released

    def set_host_delay(self, name: str, delay_s: float | None, now: float) -> int:
        """Space requests to host name ``name`` by ``delay_s`` (None: back to the configured
        delay), in place of min_delay_s and the adaptive delay but never below its robots.txt
        Crawl-delay. Applies at once: the host's next request moves by the difference (a
        backoff it is serving stays). Durable with the open transaction. Returns the hosts
        (origins) it applies to now."""
        if delay_s is None:
            self._host_delays.pop(name, None)
        else:
            own = DelayPolicy(
                min_delay_s=delay_s,
                max_delay_s=delay_s,
                delay_factor=0.0,
                max_crawl_delay_s=self._policy.max_crawl_delay_s,
                backoff_s=self._policy.backoff_s,
                max_backoff_s=self._policy.max_backoff_s,
            )
            self._host_delays[name] = (delay_s, own)
        self._save_control()
        hosts = self._matching(name)
        for host in hosts:
            self._respace(host, now)
        return len(hosts)

    def _respace(self, host: HostQueue, now: float) -> None:
        """Move a host's next request by the change of its spacing (not while backing off)."""
        if host.errors or host.state is HostState.RETIRED or host.next_at == 0.0:
            return  # backing off (that stays), retired, or never requested: nothing to move
        crawl_delay = host.rules.crawl_delay_s if host.rules is not None else None
        spacing = delay_for(0.0, crawl_delay, self._policy_of(host))  # adaptive: next response
        host.next_at += spacing - host.delay_s
        host.delay_s = spacing
        if host.state is HostState.SNOOZED or (
            host.state is HostState.READY and host.next_at > now
        ):
            self._queues.settle(host, now)  # snoozed anew: its FIFO or heap entry is stale

    def reconfigure(self, s: CrawlSettings, now: float) -> None:
        """Apply a reloaded config's tunables: politeness delays and limits, connections per
        host, robots timings, host error limits, the scope and exclude patterns, the trap
        limits, max_pages and memory_urls. Identity keys (seen-set sizing, the LMDB map size)
        are refused before this is called (``engine.reload``). A changed scope applies to
        links found from now on (links remembered as settled are forgotten)."""
        p = s.politeness
        self._admission.reconfigure(check_scope(s), s.scope.exclude,
                                    Limits.from_settings(s.crawl), s.crawl.max_pages)  # fmt: skip
        policy, self._policy = self._policy, DelayPolicy.from_settings(p)
        self._retry_policy = RetryPolicy.from_settings(s.fetch)
        self._queues.connections_per_host = p.connections_per_host
        self._obey_robots = p.obey_robots
        self._robots_retry_s = p.robots_retry_s
        self._robots_attempts = p.robots_attempts
        self._max_host_errors = p.max_host_errors
        self._host_error_urls = p.host_error_urls
        self._memory_urls = s.frontier.memory_urls
        if self._recrawl is not None and s.recrawl.enabled:
            self._recrawl.policy = RecrawlPolicy.from_settings(s.recrawl)
        if self._policy == policy:
            return  # the hosts' spacing stands (the adaptive part of it too)
        for name, (delay, _own) in list(self._host_delays.items()):
            self.set_host_delay(name, delay, now)  # their policies keep the new backoff
        for host in list(self._hosts.values()):
            self._respace(host, now)

    def _save_control(self) -> None:
        with self._write() as txn:
            txn.put(_BLOCKED_KEY, json.dumps(sorted(self._queues.blocked)).encode(), db=self._blobs)
            delays = {name: delay for name, (delay, _p) in self._host_delays.items()}
            txn.put(_HOST_DELAYS_KEY, json.dumps(delays, sort_keys=True).encode(), db=self._blobs)

    def _load_control(self, txn: lmdb.Transaction[bytes]) -> None:
        """The operator's blocks and host delays of earlier runs (see ``_save_control``)."""
        blocked = txn.get(_BLOCKED_KEY, db=self._blobs)
        delays = txn.get(_HOST_DELAYS_KEY, db=self._blobs)
        try:
            names = json.loads(bytes(blocked)) if blocked is not None else []
            saved = json.loads(bytes(delays)) if delays is not None else {}
            self._queues.blocked = {str(n) for n in names}
            pairs = {str(k): float(v) for k, v in saved.items()}
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("unreadable operator blocks or host delays, ignored: %r", exc)
            self._queues.blocked, pairs = set(), {}
        for name, delay in pairs.items():
            self._host_delays[name] = (delay, DelayPolicy(delay, delay, 0.0,
                self._policy.max_crawl_delay_s, self._policy.backoff_s,
                self._policy.max_backoff_s))  # fmt: skip

    # ----------------------------------------------------------------------------- lifecycle

    @property
    def pending(self) -> int:
        """URLs queued or in flight; the crawl is over when this is 0."""
        return self.queued + self.in_flight

    def host_state(self, host_key: str) -> HostState | None:
        """State of a host queue (for tests and progress)."""
        host = self._hosts.get(host_key)
        return host.state if host is not None else None

    def stats(self) -> dict[str, float | int]:
        """Counters for the report and progress lines."""
        return {
            "hosts": len(self._hosts),
            "queued": self.queued,
            "in_flight": self.in_flight,
            "admitted": self.admitted,
            "resumed": self.resumed,
            "hot": self.hot_total,
            "peak_hot": self.peak_hot,
            "spilled": self.spilled,
            "refilled": self.refilled,
            "blocked_hosts": len(self._queues.blocked),
            "held_by_blocks": self.held_by_blocks,
        }

    def host_signals(self, now: float, worst: int = 5) -> HostSignals:
        """Hosts by state, the worst held ones and the next one due, for the status: O(held
        hosts), no scan of all hosts (the counts are kept by every transition)."""
        counts = {state: self._queues.count(state) for state in HostState}
        holding = self._holding
        for origin_, (host, _reason) in list(holding.items()):
            if host.next_at <= now or host.state is HostState.RETIRED:
                del holding[origin_]
        held = [
            (origin_, reason, host.next_at - now)
            for origin_, (host, reason) in holding.items()
            if host.state is HostState.SNOOZED
        ]
        snoozed = counts[HostState.SNOOZED]
        return HostSignals(
            total=counts[HostState.READY]
            + snoozed
            + counts[HostState.BUSY]
            + counts[HostState.BLOCKED],
            ready=counts[HostState.READY],
            waiting=max(0, snoozed - len(held)),
            backoff=len(held),
            robots=self.robots_waiting,
            blocked=counts[HostState.BLOCKED],
            retired=counts[HostState.RETIRED],
            worst=tuple(heapq.nlargest(worst, held, key=lambda h: h[2])),
            next_due=self._next_due(now),
        )

    def _next_due(self, now: float) -> tuple[str, str, float] | None:
        """The snoozed host due first: (origin, why it waits, seconds until it is due)."""
        host = self._queues.first_snoozed()  # (next_wake also covers revisits not yet due)
        if host is None:
            return None
        wake = host.wake_at
        held = self._holding.get(host.origin)
        if held is not None:
            reason = held[1]
        elif host.due() > host.next_at:
            reason = "retry"
        elif (
            host.rules is not None
            and host.rules.crawl_delay_s is not None
            and host.rules.crawl_delay_s >= host.delay_s
            and host.rules.crawl_delay_s > self._policy.min_delay_s
        ):
            reason = "crawl-delay"
        else:
            reason = "delay"
        return host.origin, reason, max(0.0, wake - now)

    def busiest(self, n: int = 10) -> list[tuple[str, int, int]]:
        """The ``n`` hosts with the most requests started this run: (origin, started, queued).
        A scan of every host: callers space it out (the engine's status, every few seconds)."""
        top = heapq.nlargest(n, self._hosts.values(), key=lambda h: (h.starts, h.queued))
        return [(h.origin, h.starts, h.queued) for h in top if h.starts or h.queued]

    def seen_stats(self) -> dict[str, float | int]:
        """The seen-set's counters (Bloom filter size, estimated false positives...)."""
        return self._seen.stats()

    def _resume(self) -> None:
        """Rebuild in-memory state from LMDB left by an earlier run of this crawl."""
        snapshot = self._state_dir / "seen.bloom"
        with self._env.begin() as txn:
            counts = {}
            for hid, origin_, count in self._store.queued_hosts(txn):
                if origin_ is None:
                    raise StateMismatch(f"queue block of unknown host id {hid}")
                counts[origin_] = (hid, count)
            seen_count = self._seen.exact_count(txn)
            raw = txn.get(_ADMITTED_KEY, db=self._blobs)
            self.admitted = int.from_bytes(raw, "big") if raw is not None else 0
            admitted = {
                key: self._stored_admitted(txn, key)
                for key in (counts if self._admission.limits.max_pages_per_host else ())
            }
            self._load_control(txn)
        if seen_count and not self._seen.load_snapshot(snapshot, seen_count):
            log.warning("seen-set snapshot missing or stale: rebuilding the Bloom filter")
            with self._env.begin() as txn:
                self._seen.rebuild(txn)
        for host_key, (hid, count) in counts.items():
            host = self._new_host(host_key)
            host.admitted = admitted.get(host_key, 0)
            host.hid = hid
            host.unloaded = count
            self.queued += count
            self._queues.settle(host, 0.0)
        self.resumed = self.queued
        if counts:
            log.info("resumed: %d URLs queued over %d hosts", self.queued, len(counts))

    def checkpoint(self) -> None:
        """Flush LMDB to disk and snapshot the Bloom filter (StorageError, or OSError from
        the snapshot, if writing fails). A snapshot without room (ENOSPC, EDQUOT) is skipped
        with a warning, not raised: it only saves a restart time (``seen.py``: the next start
        loads the previous snapshot and the digests logged since, or rebuilds the filter from
        LMDB), so it must not fail a crawl, least of all one that has ended."""
        with storage_errors(self._env_path):
            self._env.sync(True)
            try:
                self._seen.save_snapshot(self._state_dir / "seen.bloom")
            except OSError as exc:
                if exc.errno not in _NO_ROOM:
                    raise
                self._snapshot_skipped(exc)
                return
        if self._snapshot_failing:
            self._snapshot_failing = False
            log.warning("seen-set snapshot written again in %s", self._state_dir)

    def _snapshot_skipped(self, exc: OSError) -> None:
        """Say once (until a snapshot is written again) that snapshots are being skipped."""
        if self._snapshot_failing:
            return
        self._snapshot_failing = True
        size = self._seen.stats()["bloom_bytes"]
        log.warning(
            "seen-set snapshot not written (%s: %s; it needs %.1f MB free in %s): the crawl "
            "goes on, nothing is lost (a restart loads the previous snapshot and the URLs "
            "recorded since, or rebuilds the set from LMDB: slower); tried again at each "
            "checkpoint",
            os.strerror(exc.errno or 0), exc.filename or "", int(size) / 1e6, self._state_dir,
        )  # fmt: skip

    def close(self, checkpoint: bool = True) -> None:
        """Checkpoint (unless told not to: after a failed write, when the in-memory state may
        be ahead of the last commit) and release the LMDB environment and the robots cache.
        They are released even if the checkpoint fails."""
        try:
            if checkpoint:
                self.checkpoint()
        finally:
            self._close_state()

    def _close_state(self) -> None:
        """Close what the frontier holds open (LMDB environments, the robots cache)."""
        self._robots.close()
        if self._inbox is not None:
            self._inbox.close()
        self._env.close()
