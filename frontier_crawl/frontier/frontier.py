"""The frontier: which URL to fetch next, and when, so that every host is treated politely.

Mechanism (policy lives in ``politeness.py``):

* Every admitted URL is written at once to the LMDB queue database (``store.py``) under the key
  ``origin \\x00 prio seq``; it is deleted only when its fetch is complete. LMDB is therefore the
  truth about outstanding work, and a process killed at any instant loses nothing.
* Each host (origin) has a :class:`HostQueue` whose in-memory ``hot`` deque caches the head of its
  LMDB queue. One global budget (``memory_urls``) caps the hot entries of all hosts together;
  past it, new URLs stay only in LMDB (``unloaded``) and are read back in batches when the host's
  deque runs dry (``loaded_upto`` remembers where the in-memory prefix ends).
* A host is in exactly one :class:`HostState`. READY hosts wait in a FIFO, SNOOZED hosts in a heap
  ordered by wake time, BUSY hosts (all connections used, or robots.txt in flight) in neither, so
  a waiting host never holds a fetch slot. :meth:`Frontier._settle` is the one transition.
* ``min_delay_s`` (raised to the robots.txt Crawl-delay) runs from the end of one response to
  the next request: :meth:`complete` sets ``next_at = now + delay``.
* robots.txt is the first request to every host (a robots :class:`Ticket`), unless a fresh copy is
  in the disk cache. Until it is known the host issues nothing else.
"""

from __future__ import annotations

import heapq
import logging
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from frontier_crawl.frontier.politeness import delay_for
from frontier_crawl.frontier.robots import RobotsCache, Rules
from frontier_crawl.frontier.seen import SeenSet
from frontier_crawl.frontier.store import QueueEntry, QueueStore, open_env
from frontier_crawl.frontier.urls import canonicalize, host_of, origin, url_digest

if TYPE_CHECKING:
    import lmdb

    from frontier_crawl.config import CrawlSettings

log = logging.getLogger(__name__)

NORMAL_PRIO = 1
REFILL_BATCH = 512

#: reasons passed to the reject callback (they become crawl-log outcomes)
ROBOTS_DENIED = "robots-denied"
ROBOTS_UNAVAILABLE = "robots-unavailable"


class HostState(Enum):
    """Where a host queue is in the scheduler."""

    EMPTY = "empty"  #: nothing queued (requests may still be in flight)
    READY = "ready"  #: queued work, politeness slot open: in the ready FIFO
    SNOOZED = "snoozed"  #: queued work, waiting for its wake time: in the heap
    BUSY = "busy"  #: queued work, every connection in use (or robots.txt in flight)
    RETIRED = "retired"  #: given up; URLs recorded as failed, new ones refused


@dataclass(slots=True, frozen=True)
class Ticket:
    """One URL handed out for fetching; give it back with complete/retry/robots_done."""

    key: bytes  #: LMDB queue key (b"" for robots.txt tickets)
    origin: str
    url: str
    depth: int
    hops: int = 0
    attempt: int = 0
    referrer: str | None = None
    robots: bool = False


@dataclass(slots=True, eq=False)
class HostQueue:
    """Per-host scheduling facts. Small on purpose: there may be millions of hosts."""

    origin: str
    state: HostState = HostState.EMPTY
    hot: deque[tuple[bytes, QueueEntry]] = field(default_factory=deque)
    unloaded: int = 0  #: entries in LMDB after ``loaded_upto`` and not in ``hot``
    loaded_upto: bytes | None = None
    in_flight: int = 0
    next_at: float = 0.0  #: monotonic time before which no request may start
    rules: Rules | None = None  #: robots.txt rules, None while unknown
    robots_in_flight: bool = False
    robots_attempts: int = 0

    @property
    def queued(self) -> int:
        return len(self.hot) + self.unloaded


class Frontier:
    """Admission (scope, dedup), per-host queues in LMDB and politeness scheduling."""

    def __init__(
        self,
        state_dir: Path,
        *,
        allow_domains: Iterable[str],
        exclude: Iterable[str],
        max_depth: int,
        max_pages: int,
        min_delay_s: float,
        connections_per_host: int,
        obey_robots: bool,
        user_agent: str,
        robots_ttl_s: float,
        robots_retry_s: float,
        robots_attempts: int,
        memory_urls: int,
        seen_capacity: int,
        seen_error_rate: float,
        map_size: int,
        on_reject: Callable[[Ticket, str], None] | None = None,
    ) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self._state_dir = state_dir
        self._domains = tuple(d.lower().strip(".") for d in allow_domains)
        self._exclude = re.compile("|".join(f"(?:{p})" for p in exclude)) if exclude else None
        self._max_depth = max_depth
        self._max_pages = max_pages
        self._min_delay_s = min_delay_s
        self._cph = connections_per_host
        self._obey_robots = obey_robots
        self._robots_retry_s = robots_retry_s
        self._robots_attempts = robots_attempts
        self._memory_urls = memory_urls
        self._on_reject = on_reject or (lambda _t, _r: None)
        self._env: lmdb.Environment = open_env(state_dir / "frontier.lmdb", map_size)
        self._store = QueueStore(self._env)
        self._seen = SeenSet(self._env, seen_capacity, seen_error_rate)
        self._robots = RobotsCache(state_dir / "robots", user_agent, robots_ttl_s)
        self._txn: lmdb.Transaction[bytes] | None = None
        self._hosts: dict[str, HostQueue] = {}
        self._ready: deque[HostQueue] = deque()
        self._snoozed: list[tuple[float, int, HostQueue]] = []
        self._heap_seq = 0
        self.queued = 0  #: URLs admitted and not yet complete, in flight excluded
        self.in_flight = 0
        self.hot_total = 0
        self.admitted = 0
        self.spilled = 0  #: URLs that went to LMDB only, past the memory budget
        self.refilled = 0  #: URLs read back from LMDB into memory
        self.peak_hot = 0
        self._resume()

    @classmethod
    def from_settings(
        cls,
        s: CrawlSettings,
        state_dir: Path,
        on_reject: Callable[[Ticket, str], None] | None = None,
    ) -> Frontier:
        """Build a frontier from the crawl settings (the only place that reads them)."""
        domains = s.scope.allow_domains or tuple(
            h for h in (host_of(c) for c in map(canonicalize, s.crawl.seeds) if c) if h
        )
        return cls(
            state_dir,
            allow_domains=domains,
            exclude=s.scope.exclude,
            max_depth=s.crawl.max_depth,
            max_pages=s.crawl.max_pages,
            min_delay_s=s.politeness.min_delay_s,
            connections_per_host=s.politeness.connections_per_host,
            obey_robots=s.politeness.obey_robots,
            user_agent=s.politeness.user_agent,
            robots_ttl_s=s.politeness.robots_ttl_s,
            robots_retry_s=s.politeness.robots_retry_s,
            robots_attempts=s.politeness.robots_attempts,
            memory_urls=s.frontier.memory_urls,
            seen_capacity=s.frontier.seen_capacity,
            seen_error_rate=s.frontier.seen_error_rate,
            map_size=s.frontier.lmdb_map_size_bytes,
            on_reject=on_reject,
        )

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
        with self._env.begin(write=True) as txn:
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
            with self._env.begin(write=True) as txn:
                yield txn

    # ----------------------------------------------------------------------------- admission

    def in_scope(self, url: str) -> bool:
        """Is a canonical URL inside the allowed domains and not excluded?"""
        host = host_of(url)
        if self._domains and not any(host == d or host.endswith("." + d) for d in self._domains):
            return False
        return self._exclude is None or self._exclude.search(url) is None

    def add(
        self,
        urls: Iterable[str],
        *,
        depth: int,
        referrer: str | None = None,
        hops: int = 0,
        now: float = 0.0,
    ) -> int:
        """Admit new URLs (canonicalised, in scope, unseen); returns how many were queued."""
        if depth > self._max_depth:
            return 0
        added = 0
        with self._write() as txn:
            for raw in urls:
                url = canonicalize(raw)
                if url is None or not self.in_scope(url):
                    continue
                if self._max_pages and self.admitted + added >= self._max_pages:
                    break
                if not self._seen.add_new(txn, url_digest(url)):
                    continue
                entry = QueueEntry(url=url, depth=depth, hops=hops, referrer=referrer)
                added += self._enqueue(txn, origin(url), entry, now)
        self.admitted += added
        return added

    def _enqueue(
        self, txn: lmdb.Transaction[bytes], host_key: str, entry: QueueEntry, now: float
    ) -> bool:
        """Queue an admitted URL in LMDB and, budget permitting, in memory; False if refused."""
        host = self._hosts.get(host_key)
        if host is None:
            host = self._new_host(host_key)
        elif host.state is HostState.RETIRED:
            self._on_reject(
                Ticket(b"", host_key, entry.url, entry.depth, entry.hops, 0, entry.referrer),
                ROBOTS_UNAVAILABLE,
            )
            return False
        key = self._store.put(txn, host_key, NORMAL_PRIO, entry)
        self.queued += 1
        if host.unloaded == 0 and self.hot_total < self._memory_urls:
            host.hot.append((key, entry))
            host.loaded_upto = key
            self._hot_changed(1)
        else:
            host.unloaded += 1
            self.spilled += 1
        if host.state in (HostState.EMPTY, HostState.BUSY):
            self._settle(host, now)
        return True

    def _new_host(self, host_key: str) -> HostQueue:
        host = HostQueue(host_key)
        if self._obey_robots:
            host.rules = self._robots.get(host_key)
        else:
            host.rules = Rules("", None)
        self._hosts[host_key] = host
        return host

    def _hot_changed(self, delta: int) -> None:
        self.hot_total += delta
        if self.hot_total > self.peak_hot:
            self.peak_hot = self.hot_total

    # ----------------------------------------------------------------------------- scheduling

    def _settle(self, host: HostQueue, now: float) -> None:
        """The one state transition: place a host where its facts say it belongs."""
        if host.state is HostState.RETIRED:
            return
        if host.robots_in_flight or host.in_flight >= self._cph:
            new = HostState.BUSY
        elif host.queued == 0:
            new = HostState.EMPTY
        elif host.next_at <= now:
            new = HostState.READY
        else:
            new = HostState.SNOOZED
        if new is HostState.READY and host.state is not HostState.READY:
            self._ready.append(host)
        elif new is HostState.SNOOZED:
            self._heap_seq += 1
            heapq.heappush(self._snoozed, (host.next_at, self._heap_seq, host))
        host.state = new

    def _wake(self, now: float) -> None:
        heap = self._snoozed
        while heap and heap[0][0] <= now:
            wake, _, host = heapq.heappop(heap)
            if host.state is HostState.SNOOZED and wake == host.next_at:
                self._settle(host, now)

    def next_wake(self) -> float | None:
        """Monotonic time at which a snoozed host becomes due (None if no host is snoozed)."""
        heap = self._snoozed
        while heap:
            wake, _, host = heap[0]
            if host.state is HostState.SNOOZED and wake == host.next_at:
                return wake
            heapq.heappop(heap)  # stale entry
        return None

    @property
    def has_ready(self) -> bool:
        """Is any host ready right now (as of the last next_ready call)?"""
        return bool(self._ready)

    def next_ready(self, now: float, limit: int) -> list[Ticket]:
        """Up to ``limit`` tickets from hosts whose politeness slot is open at ``now``."""
        self._wake(now)
        out: list[Ticket] = []
        ready = self._ready
        while ready and len(out) < limit:
            host = ready.popleft()
            if host.state is not HostState.READY:
                continue  # stale: it moved on since it was queued here
            ticket = self._take(host)
            host.state = HostState.BUSY  # out of the FIFO; _settle puts it back where it belongs
            if ticket is not None:
                out.append(ticket)
                self.in_flight += 1
            self._settle(host, now)
        return out

    def _take(self, host: HostQueue) -> Ticket | None:
        """The host's next ticket: robots.txt first, then its queue minus robots-denied URLs."""
        if host.rules is None:
            host.robots_in_flight = True
            return Ticket(b"", host.origin, host.origin + "/robots.txt", 0, robots=True)
        while host.queued:
            if not host.hot:
                self._refill(host)
            key, entry = host.hot.popleft()
            self._hot_changed(-1)
            self.queued -= 1
            ticket = Ticket(
                key, host.origin, entry.url, entry.depth, entry.hops, entry.attempt, entry.referrer
            )
            if host.rules.allowed(entry.url):
                host.in_flight += 1
                return ticket
            self._on_reject(ticket, ROBOTS_DENIED)
            with self._write() as txn:
                self._store.delete(txn, key)
        return None

    def _refill(self, host: HostQueue) -> None:
        room = max(1, min(REFILL_BATCH, self._memory_urls - self.hot_total))
        with self._write() as txn:
            batch = self._store.read_after(
                txn, host.origin, host.loaded_upto, min(room, host.unloaded)
            )
        if not batch:  # LMDB and the counters disagree: trust LMDB
            log.error(
                "host %s: %d entries expected in LMDB, none found", host.origin, host.unloaded
            )
            self.queued -= host.unloaded
            host.unloaded = 0
            return
        host.hot.extend(batch)
        host.loaded_upto = batch[-1][0]
        host.unloaded -= len(batch)
        self.refilled += len(batch)
        self._hot_changed(len(batch))

    # ----------------------------------------------------------------------------- completion

    def complete(self, ticket: Ticket, now: float, fetch_s: float = 0.0) -> None:
        """A page ticket is finished for good (fetched, or failed for the last time)."""
        host = self._hosts[ticket.origin]
        with self._write() as txn:
            self._store.delete(txn, ticket.key)
        self._release(
            host, ticket, now, delay_for(fetch_s, self._crawl_delay(host), self._min_delay_s)
        )

    def retry(self, ticket: Ticket, now: float, delay_s: float, fetch_s: float = 0.0) -> None:
        """Fetch this ticket again, no earlier than ``delay_s`` from now (host snoozed as well)."""
        host = self._hosts[ticket.origin]
        entry = QueueEntry(
            ticket.url, ticket.depth, ticket.hops, ticket.attempt + 1, ticket.referrer
        )
        with self._write() as txn:
            self._store.rewrite(txn, ticket.key, entry)
        host.hot.appendleft((ticket.key, entry))
        self._hot_changed(1)
        self.queued += 1
        polite = delay_for(fetch_s, self._crawl_delay(host), self._min_delay_s)
        self._release(host, ticket, now, max(polite, delay_s))

    def robots_done(
        self, ticket: Ticket, now: float, status: int, body: bytes, fetch_s: float = 0.0
    ) -> None:
        """Record a robots.txt fetch: rules known, retry later, or retire the host."""
        host = self._hosts[ticket.origin]
        host.robots_in_flight = False
        rules = self._robots.store(host.origin, status, body)
        if rules is not None:
            host.rules = rules
            delay = delay_for(fetch_s, rules.crawl_delay_s, self._min_delay_s)
        else:
            host.robots_attempts += 1
            if host.robots_attempts >= self._robots_attempts:
                log.warning("robots.txt of %s unavailable: host retired", host.origin)
                self.in_flight -= 1
                self._retire(host, ROBOTS_UNAVAILABLE)
                return
            delay = self._robots_retry_s * 2 ** (host.robots_attempts - 1)
        self._release(host, None, now, max(delay, self._min_delay_s))

    def _release(self, host: HostQueue, ticket: Ticket | None, now: float, delay: float) -> None:
        if ticket is not None:
            host.in_flight -= 1
        self.in_flight -= 1
        host.next_at = max(host.next_at, now + delay)
        if host.state is not HostState.READY:
            self._settle(host, now)

    @staticmethod
    def _crawl_delay(host: HostQueue) -> float | None:
        return host.rules.crawl_delay_s if host.rules is not None else None

    def _retire(self, host: HostQueue, reason: str) -> None:
        """Give up on a host: every queued URL is recorded as failed with ``reason``."""
        host.state = HostState.RETIRED
        with self.batch(), self._write() as txn:
            while host.queued:
                if not host.hot:
                    self._refill(host)  # reads through the same (batch) transaction
                for key, entry in host.hot:
                    self.queued -= 1
                    self._reject_entry(txn, host, key, entry, reason)
                self._hot_changed(-len(host.hot))
                host.hot.clear()

    def _reject_entry(
        self,
        txn: lmdb.Transaction[bytes],
        host: HostQueue,
        key: bytes,
        entry: QueueEntry,
        reason: str,
    ) -> None:
        ticket = Ticket(
            key, host.origin, entry.url, entry.depth, entry.hops, entry.attempt, entry.referrer
        )
        self._on_reject(ticket, reason)
        self._store.delete(txn, key)

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
            "hot": self.hot_total,
            "peak_hot": self.peak_hot,
            "spilled": self.spilled,
            "refilled": self.refilled,
        }

    def seen_stats(self) -> dict[str, float | int]:
        """The seen-set's counters (Bloom filter size, estimated false positives...)."""
        return self._seen.stats()

    def _resume(self) -> None:
        """Rebuild in-memory state from LMDB left by an earlier run of this crawl."""
        snapshot = self._state_dir / "seen.bloom"
        with self._env.begin() as txn:
            counts = self._store.host_counts(txn)
            seen_count = self._seen.exact_count(txn)
        if seen_count and not self._seen.load_snapshot(snapshot, seen_count):
            with self._env.begin() as txn:
                self._seen.rebuild(txn)
        for host_key, count in counts.items():
            host = self._new_host(host_key)
            host.unloaded = count
            self.queued += count
            self._settle(host, 0.0)
        if counts:
            log.info("resumed: %d URLs queued over %d hosts", self.queued, len(counts))

    def checkpoint(self) -> None:
        """Flush LMDB to disk and snapshot the Bloom filter."""
        self._env.sync(True)
        self._seen.save_snapshot(self._state_dir / "seen.bloom")

    def close(self) -> None:
        """Checkpoint and release the LMDB environment and the robots cache."""
        self.checkpoint()
        self._robots.close()
        self._env.close()
