"""The continuous crawl's side of the host queues: revisits loaded, handed out and retried.

The schedule itself (due keys on disk, validators, adapted intervals) is ``recrawl.py``'s
:class:`Recrawl`; this is where it meets the hosts. Due revisits are loaded a bounded number
at a time into their host's ``revisits`` heap (:meth:`Revisits.pump`) and handed out by
``next_ready`` under the same politeness, robots rules and IP groups as new URLs
(:meth:`Revisits.turn`: their share of a host with new URLs queued bounded by
``revisit_share``; :meth:`Revisits.take`), their ticket's ``last`` holding the previous
capture. A ticket's next visit, staged when it completes, is written with its done mark
(:meth:`Revisits.done`).

Continuous crawling is a strategy the frontier chooses once (:func:`revisits_for`):
:class:`Revisits` for a continuous crawl, :class:`OnePass` (no revisits: its steps do nothing
or only what a one-pass crawl does) otherwise. The frontier calls the same steps either way
(:class:`RevisitStrategy`) and never asks which one it holds.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from frontier_crawl.frontier.hosts import HostState
from frontier_crawl.frontier.records import Ticket
from frontier_crawl.frontier.recrawl import DUE_KEY_LEN, HostRevisits, RecrawlPolicy
from frontier_crawl.frontier.urls import canonicalize, origin

if TYPE_CHECKING:
    import lmdb

    from frontier_crawl.config.settings import RecrawlSection
    from frontier_crawl.frontier.completion import Completion
    from frontier_crawl.frontier.hosts import HostQueue, HostQueues
    from frontier_crawl.frontier.recrawl import Recrawl
    from frontier_crawl.frontier.store import QueueStore

#: the frontier's host queue for an origin, made (with its admitted count) if it has none
HostFor = Callable[["lmdb.Transaction[bytes]", str], "HostQueue"]
#: a transaction to read in: the open batch's, else a read-only one of its own
Read = Callable[[], AbstractContextManager["lmdb.Transaction[bytes]"]]


class RevisitStrategy(Protocol):
    """The steps of a crawl's revisits the frontier takes (:class:`Revisits`, :class:`OnePass`)."""

    @property
    def continuous(self) -> bool:
        """A continuous crawl (``[recrawl] enabled``): it never ends by itself."""
        ...

    def stage(self, ticket: Ticket, c: Completion) -> None:
        """A ticket's final outcome (its next visit, written by :meth:`done`)."""
        ...

    def done(self, txn: lmdb.Transaction[bytes], keys: Iterable[bytes]) -> None:
        """Completed tickets: their queue entries marked done, their next visits written."""
        ...

    def next_wake(self) -> float | None: ...
    def pump(self, now: float) -> None: ...
    def turn(self, host: HostQueue, revisits: HostRevisits, now: float) -> bool: ...
    def take(
        self, host: HostQueue, revisits: HostRevisits, now: float, denied: str
    ) -> Ticket | None: ...
    def retry(self, host: HostQueue, ticket: Ticket, at: float) -> None: ...
    def put_back(self, txn: lmdb.Transaction[bytes], revisits: HostRevisits) -> None: ...
    def sitemap_lastmod(self, pairs: Iterable[tuple[str, float]]) -> int: ...
    def freshness(self, now_wall: float) -> dict[str, object]: ...
    def reconfigure(self, r: RecrawlSection) -> None: ...
    def flush(self, txn: lmdb.Transaction[bytes]) -> None: ...
    def committed(self) -> None: ...
    def aborted(self) -> None: ...


class OnePass:
    """A one-pass crawl's revisits: none. A completed ticket's entry is marked done, nothing
    is scheduled; a host never holds revisits, so the steps that hand them out are never
    reached (they hand out nothing)."""

    __slots__ = ("_store",)

    continuous = False

    def __init__(self, store: QueueStore) -> None:
        self._store = store

    def stage(self, ticket: Ticket, c: Completion) -> None:
        pass

    def done(self, txn: lmdb.Transaction[bytes], keys: Iterable[bytes]) -> None:
        done = self._store.done
        for key in keys:
            done(key)

    def next_wake(self) -> float | None:
        return None

    def pump(self, now: float) -> None:
        pass

    def turn(self, host: HostQueue, revisits: HostRevisits, now: float) -> bool:
        return False

    def take(
        self, host: HostQueue, revisits: HostRevisits, now: float, denied: str
    ) -> Ticket | None:
        return None

    def retry(self, host: HostQueue, ticket: Ticket, at: float) -> None:
        pass

    def put_back(self, txn: lmdb.Transaction[bytes], revisits: HostRevisits) -> None:
        pass

    def sitemap_lastmod(self, pairs: Iterable[tuple[str, float]]) -> int:
        return 0

    def freshness(self, now_wall: float) -> dict[str, object]:
        return {"enabled": False}

    def reconfigure(self, r: RecrawlSection) -> None:
        pass

    def flush(self, txn: lmdb.Transaction[bytes]) -> None:
        pass

    def committed(self) -> None:
        pass

    def aborted(self) -> None:
        pass


class Revisits:
    """Revisits over the host queues (see the module). ``write``: the open batch's
    transaction (``Transactions.write``); ``in_scope``: the current scope (a reloaded one may
    leave a scheduled URL out); ``host_for``: the host queue of an origin; ``on_reject``:
    records a revisit robots.txt now denies."""

    __slots__ = ("_host_for", "_in_scope", "_on_reject", "_queues", "_read", "_store",
                 "_wall_clock", "_write", "recrawl")  # fmt: skip

    continuous = True

    def __init__(
        self,
        recrawl: Recrawl,
        queues: HostQueues,
        store: QueueStore,
        *,
        write: Callable[[], AbstractContextManager[lmdb.Transaction[bytes]]],
        read: Read,
        in_scope: Callable[[str], bool],
        host_for: HostFor,
        on_reject: Callable[[Ticket, str], None],
        wall_clock: Callable[[], float],
    ) -> None:
        self.recrawl = recrawl
        self._queues = queues
        self._store = store
        self._write = write
        self._read = read
        self._in_scope = in_scope
        self._host_for = host_for
        self._on_reject = on_reject
        self._wall_clock = wall_clock

    def stage(self, ticket: Ticket, c: Completion) -> None:
        self.recrawl.stage(ticket, c)

    def done(self, txn: lmdb.Transaction[bytes], keys: Iterable[bytes]) -> None:
        """Each ticket's next visit, staged when it completed, is written in the same
        transaction as its entry's done mark."""
        recrawl = self.recrawl
        for key in keys:
            if len(key) != DUE_KEY_LEN:  # a revisit has no queue entry
                self._store.done(key)
            recrawl.apply(txn, key)

    def next_wake(self) -> float | None:
        """Monotonic time at which the next revisit becomes due (None: none scheduled)."""
        due = self.recrawl.next_due()
        if due is None:
            return None
        return time.monotonic() + max(0.0, due - self._wall_clock())

    def pump(self, now: float) -> None:
        """Load the revisits that came due into their hosts' queues (a bounded number)."""
        recrawl = self.recrawl
        wall = self._wall_clock()
        if not recrawl.wants_pump(wall):
            return
        with self._write() as txn:
            for key, visit in recrawl.due_batch(txn, wall):
                if not self._in_scope(visit.url):  # a reloaded scope left it out
                    recrawl.forget(txn, key[8:])
                    continue
                host = self._host_for(txn, origin(visit.url))
                if host.state is HostState.RETIRED:
                    recrawl.put_back(txn, visit, key[8:])
                    continue
                if host.revisits is None:
                    host.revisits = HostRevisits()
                host.revisits.push(0.0, key, 0, visit)
                if host.state in (HostState.EMPTY, HostState.BUSY):
                    self._queues.settle(host, now)

    def turn(self, host: HostQueue, revisits: HostRevisits, now: float) -> bool:
        """Does the host's next request go to a revisit (one is ready)? Always when it has no
        new URL in memory or LMDB; else as ``revisit_share`` says."""
        if revisits.ready_at() > now:
            return False
        if not (host.hot or host.unloaded):
            return True
        return revisits.turn(self.recrawl.policy.revisit_share)

    def take(
        self, host: HostQueue, revisits: HostRevisits, now: float, denied: str
    ) -> Ticket | None:
        """The host's first ready revisit as a ticket (its ``key`` the due key, its ``last``
        the previous captures); one robots.txt now denies is recorded (``denied``, the
        reason) and put back."""
        recrawl = self.recrawl
        assert host.rules is not None
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
            self._on_reject(ticket, denied)
            with self._write() as txn:
                recrawl.put_back(txn, visit, key[8:])
        if not heap:
            host.revisits = None
        return out

    def retry(self, host: HostQueue, ticket: Ticket, at: float) -> None:
        """A revisit failed transiently with retries left: again at monotonic time ``at``."""
        visit = self.recrawl.flying.pop(ticket.key, None)
        if visit is None:
            return
        if host.revisits is None:
            host.revisits = HostRevisits()
        host.revisits.push(at, ticket.key, ticket.attempt + 1, visit)

    def put_back(self, txn: lmdb.Transaction[bytes], revisits: HostRevisits) -> None:
        """A retired host's revisits in memory: back in the schedule (due again later)."""
        for _ready, key, _attempt, visit in revisits.heap:
            self.recrawl.put_back(txn, visit, key[8:])

    def sitemap_lastmod(self, pairs: Iterable[tuple[str, float]]) -> int:
        """A sitemap's ``(<loc>, <lastmod> epoch seconds)`` pairs: each scheduled URL whose
        last capture is older than its lastmod becomes due now. Returns how many did (URLs
        that do not canonicalise or are not scheduled are skipped)."""
        made = 0
        with self._write() as txn:
            for url, lastmod in pairs:
                canonical = canonicalize(url)
                if canonical is not None:
                    made += self.recrawl.make_due(txn, canonical, lastmod)
        return made

    def freshness(self, now_wall: float) -> dict[str, object]:
        """The schedule's figures (``Recrawl.freshness``)."""
        with self._read() as txn:
            return self.recrawl.freshness(txn, now_wall)

    def reconfigure(self, r: RecrawlSection) -> None:
        """A reloaded ``[recrawl]``: its policy applies from each URL's next visit."""
        if r.enabled:
            self.recrawl.policy = RecrawlPolicy.from_settings(r)

    def flush(self, txn: lmdb.Transaction[bytes]) -> None:
        self.recrawl.flush(txn)

    def committed(self) -> None:
        self.recrawl.committed()

    def aborted(self) -> None:
        self.recrawl.aborted()
