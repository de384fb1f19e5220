"""The hosts' queued URLs in memory under one global budget (guarantee 3: flat memory).

Every queued URL is in LMDB (``store.py``); a host's in-memory ``hot`` list caches the head of
its LMDB queue (from ``hot[head]`` on: taking an entry moves ``head``, and the list is cut down
once half of it is taken). One global budget (``memory_urls``) caps the hot entries of all hosts
together; past it, new URLs stay only in LMDB (``unloaded``) and are read back in batches of at
most ``REFILL_BATCH`` when the host's list runs dry (``loaded_upto`` remembers where the
in-memory prefix ends). A host's queue is in key order, which is priority order
(``store.rank_of``): a URL that sorts before ``loaded_upto`` is put in its place in the list, a
URL of the same or a lower priority appended (no search in the common case, every URL priority
0), and over the budget the list's last entry goes back to LMDB
(:meth:`QueueBuffer.hold_ahead`). A host with nothing queued keeps no list (and
``HostQueues.settle`` drops its parsed robots.txt), so an idle host costs ~300 bytes (its
HostQueue is 232, its origin string and dict entry the rest).

A URL that failed transiently waits for its own retry time in its host's ``retries`` heap
(:meth:`QueueBuffer.requeue`), behind the host's other queued URLs: :meth:`QueueBuffer.pop`
takes a due retry at most every other request of a host with other URLs queued.

``queued`` counts the URLs admitted and not yet handed out (in memory, in LMDB, retries).
"""

from __future__ import annotations

import bisect
import heapq
import logging
from collections.abc import Iterator
from operator import itemgetter
from typing import TYPE_CHECKING

from frontier_crawl.frontier.store import DEFAULT_RANK, QueueEntry, key_before, key_rank, rank_of

if TYPE_CHECKING:
    import lmdb

    from frontier_crawl.frontier.hosts import HostQueue
    from frontier_crawl.frontier.store import QueueStore
    from frontier_crawl.frontier.txn import Transactions

log = logging.getLogger(__name__)

REFILL_BATCH = 512  #: URLs read back from LMDB at most at once, for one host
_ENTRY_KEY = itemgetter(0)  #: the key of a host's (key, entry) in memory


class QueueBuffer:
    """The hosts' queued URLs in memory and in LMDB, under ``memory_urls`` (see the module)."""

    __slots__ = ("_heap_seq", "_store", "_tx", "hot_total", "memory_urls", "peak_hot",
                 "queued", "ranked", "refilled", "spilled")  # fmt: skip

    def __init__(self, store: QueueStore, tx: Transactions, memory_urls: int) -> None:
        self._store = store
        self._tx = tx  #: the open batch's transaction, for refills
        self.memory_urls = memory_urls
        self.queued = 0  #: URLs admitted and not yet complete, in flight excluded
        self.hot_total = 0  #: URLs in memory (every host's ``hot`` and retries)
        self.peak_hot = 0
        self.spilled = 0  #: URLs that went to LMDB only, past the memory budget
        self.refilled = 0  #: URLs read back from LMDB into memory
        #: a URL of a lower priority than 0 was loaded, or one of another priority queued: a
        #: new URL may sort before a host's in-memory boundary (:meth:`put`)
        self.ranked = False
        self._heap_seq = 0  #: tie-breaker of the hosts' retry heaps

    def changed(self, delta: int) -> None:
        """``delta`` URLs more (or fewer) in memory."""
        self.hot_total += delta
        if self.hot_total > self.peak_hot:
            self.peak_hot = self.hot_total

    def put(self, txn: lmdb.Transaction[bytes], host: HostQueue, entry: QueueEntry) -> None:
        """Queue an admitted URL of ``host`` in LMDB and, budget permitting, in memory."""
        if host.hid < 0:
            host.hid = self._store.host_id(txn, host.origin)
        rank = DEFAULT_RANK
        if entry.priority:
            rank = rank_of(entry.priority)
            self.ranked = True
        # sorts before URLs held in memory (never, while every URL queued has priority 0)
        ahead = self.ranked and (upto := host.loaded_upto) is not None and rank < key_rank(upto)
        hot = not ahead and host.unloaded == 0 and self.hot_total < self.memory_urls
        key = self._store.add(txn, host.hid, host.origin, rank, entry, hot or ahead)
        self.queued += 1
        if ahead:
            self.hold_ahead(host, key, entry)
        elif hot:
            if host.hot is None:
                host.hot = [(key, entry)]  # sized to its one entry
                host.head = 0
            else:
                host.hot.append((key, entry))
            host.loaded_upto = key
            self.changed(1)
        else:
            host.unloaded += 1
            self.spilled += 1

    def hold_ahead(self, host: HostQueue, key: bytes, entry: QueueEntry) -> None:
        """Hold in memory, in key order, a URL whose key sorts before the host's in-memory
        boundary ``loaded_upto`` (a higher priority than URLs already loaded): every unfinished
        entry up to the boundary is held and every one after it is in LMDB, so it may not wait
        there. Over the memory budget, the host's last entry in memory goes back to LMDB (the
        boundary moves to just before it; ``read_after`` skips what is still held past it)."""
        hot = host.hot
        if hot is None:
            hot = host.hot = []
            host.head = 0
        hot.insert(bisect.bisect(hot, key, host.head, key=_ENTRY_KEY), (key, entry))
        self.changed(1)
        if self.hot_total > self.memory_urls and self._store.release(last := hot[-1][0]):
            hot.pop()
            if len(hot) == host.head:
                host.hot = None
                host.head = 0
            self.changed(-1)
            host.loaded_upto = key_before(last)
            host.unloaded += 1
            self.spilled += 1

    def pop(self, host: HostQueue, now: float) -> tuple[bytes, QueueEntry] | None:
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
            self.changed(-1)
            host.took_retry = True
            return key, entry
        host.took_retry = False
        hot = host.hot
        if hot is None:
            if host.unloaded:
                self.refill(host)
            hot = host.hot
            if hot is None:
                return None if not retries or retries[0][0] > now else self.pop(host, now)
        head = host.head
        item = hot[head]
        head += 1
        if head == len(hot):
            host.hot = None
            host.head = 0
        elif head + head >= len(hot):  # half of it taken: cut it down
            del hot[:head]
            host.head = 0
        else:
            host.head = head
        self.changed(-1)
        return item

    def refill(self, host: HostQueue) -> None:
        """Read the host's next entries back from LMDB into memory (as the budget allows)."""
        room = min(max(1, min(REFILL_BATCH, self.memory_urls - self.hot_total)), host.unloaded)
        if (txn := self._tx.txn) is not None:  # the usual case (a batch): no context manager
            batch = self._store.read_after(txn, host.hid, host.origin, host.loaded_upto, room)
        else:
            with self._tx.write() as txn:
                batch = self._store.read_after(txn, host.hid, host.origin, host.loaded_upto, room)
        if not batch:  # LMDB and the counters disagree: trust LMDB
            log.error(
                "host %s: %d entries expected in LMDB, none found", host.origin, host.unloaded
            )
            self.queued -= host.unloaded
            host.unloaded = 0
            return
        if host.hot is None:
            host.hot = batch
            host.head = 0
        else:
            host.hot.extend(batch)
        host.loaded_upto = batch[-1][0]
        if key_rank(host.loaded_upto) > DEFAULT_RANK:  # a lower priority than 0 (:meth:`put`)
            self.ranked = True
        host.unloaded -= len(batch)
        self.refilled += len(batch)
        self.changed(len(batch))

    def requeue(self, host: HostQueue, key: bytes, entry: QueueEntry, due: float) -> None:
        """A URL handed out goes back to its host's retry heap (``entry``: its next attempt,
        rewritten in LMDB in the open transaction), due at monotonic time ``due`` and not
        before another of the host's requests has started."""
        with self._tx.write() as txn:
            self._store.rewrite(txn, key, entry)
        if host.retries is None:
            host.retries = []
        self._heap_seq += 1
        heapq.heappush(host.retries, (due, self._heap_seq, key, entry, host.starts + 1))
        self.changed(1)
        self.queued += 1

    def drain(self, host: HostQueue) -> Iterator[tuple[bytes, QueueEntry]]:
        """Every URL queued for ``host`` (memory, LMDB, retries), taken out of the counts: the
        caller records each (a retired host). Call it inside a batch."""
        while host.hot or host.unloaded:
            if not host.hot:
                self.refill(host)  # reads through the same (batch) transaction
                if not host.hot:
                    break
            hot, head = host.hot, host.head
            for i in range(head, len(hot)):
                self.queued -= 1
                yield hot[i]
            self.changed(head - len(hot))
            host.hot = None
            host.head = 0
        for _due, _seq, key, entry, _starts in host.retries or ():
            self.queued -= 1
            self.changed(-1)
            yield key, entry
        host.retries = None
