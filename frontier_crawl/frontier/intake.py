"""Which host queue a URL goes to: hosts made as their first URL comes, admitted URLs queued,
hosts given up, and the admission counts the limits need, kept durable.

``admission.py`` decides which links become URLs; this is where each one is queued
(:meth:`Intake.enqueue`: in LMDB and, budget permitting, in memory, ``buffer.py``), where a
host queue is made (:meth:`Intake.host_for`, with the count of URLs earlier runs admitted for
it when ``max_pages_per_host`` is set) and where a host is retired (:meth:`Intake.retire`: its
queued URLs recorded as failed, its revisits back on the schedule). The counts go into the
transaction that changed them (:meth:`Intake.flush`), so a resumed crawl restarts neither
``crawl.max_pages`` nor ``max_pages_per_host``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from frontier_crawl.frontier.hosts import HostQueue, HostState
from frontier_crawl.frontier.records import Ticket

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import lmdb

    from frontier_crawl.frontier.buffer import QueueBuffer
    from frontier_crawl.frontier.dispatch import Dispatch
    from frontier_crawl.frontier.hosts import HostQueues
    from frontier_crawl.frontier.recrawl import HostRevisits
    from frontier_crawl.frontier.store import QueueEntry, QueueStore

log = logging.getLogger(__name__)

#: the reason a host given up after connection failures is recorded with (a crawl-log outcome)
HOST_UNREACHABLE = "host-unreachable"

ADMITTED_KEY = b"admitted"  #: blobs: URLs admitted by the crawl, all runs (u64)
ADMITTED_PREFIX = b"admitted:"  #: blobs: + origin -> its admitted URLs, with max_pages_per_host


class Intake:
    """Admitted URLs into their host queues (see the module). ``per_host_limit``: the
    current ``max_pages_per_host`` (a reload may change it); ``put_back``: a retired host's
    revisits go back on the schedule (``RevisitStrategy.put_back``); ``batch``, ``write``: the
    frontier's transactions; ``max_host_errors``: connection failures in a row that retire a
    host (0: never)."""

    __slots__ = ("_blobs", "_buffer", "_counted", "_dispatch", "_on_reject", "_per_host_limit",
                 "_put_back", "_queues", "_store", "_tx_batch", "_write", "admitted",
                 "max_host_errors")  # fmt: skip

    def __init__(
        self,
        queues: HostQueues,
        buffer: QueueBuffer,
        dispatch: Dispatch,
        store: QueueStore,
        blobs: lmdb._Database,
        *,
        per_host_limit: Callable[[], int],
        max_host_errors: int,
        put_back: Callable[[lmdb.Transaction[bytes], HostRevisits], None],
        on_reject: Callable[[Ticket, str], None],
        batch: Callable[[], AbstractContextManager[None]],
        write: Callable[[], AbstractContextManager[lmdb.Transaction[bytes]]],
    ) -> None:
        self._queues = queues
        self._buffer = buffer
        self._dispatch = dispatch
        self._store = store
        self._blobs = blobs
        self._per_host_limit = per_host_limit
        self._put_back = put_back
        self.max_host_errors = max_host_errors  #: connection failures in a row that retire a host
        self._on_reject = on_reject
        self._tx_batch = batch
        self._write = write
        self.admitted = 0  #: URLs admitted by this crawl, all runs (for crawl.max_pages)
        self._counted: dict[str, HostQueue] = {}  #: hosts whose admitted count this txn changed

    def enqueue(
        self, txn: lmdb.Transaction[bytes], host_key: str, entry: QueueEntry, now: float
    ) -> bool:
        """Queue an admitted URL in LMDB and, budget permitting, in memory; False if refused."""
        host = self._queues.hosts.get(host_key)
        if host is None:
            host = self.host_for(txn, host_key)
        elif host.state is HostState.RETIRED:
            self._on_reject(
                Ticket(b"", host_key, entry.url, entry.depth, entry.hops, 0, entry.referrer),
                host.retired,
            )
            return False
        self._buffer.put(txn, host, entry)
        host.admitted += 1
        if self._per_host_limit():
            self._counted[host_key] = host
        if host.state in (HostState.EMPTY, HostState.BUSY):
            self._queues.settle(host, now)
        return True

    def host_for(self, txn: lmdb.Transaction[bytes], host_key: str) -> HostQueue:
        """The host queue of ``host_key``, made (with its admitted count) if it has none."""
        host = self._queues.hosts.get(host_key)
        if host is None:
            host = self._queues.add(HostQueue(host_key))
            self._dispatch.join(host)
            if self._per_host_limit():
                host.admitted = self.stored_admitted(txn, host_key)
        return host

    def stored_admitted(self, txn: lmdb.Transaction[bytes], host_key: str) -> int:
        """URLs of ``host_key`` admitted by earlier runs (kept only with max_pages_per_host)."""
        raw = txn.get(ADMITTED_PREFIX + host_key.encode(), db=self._blobs)
        return int.from_bytes(raw, "big") if raw is not None else 0

    def load(self, txn: lmdb.Transaction[bytes]) -> None:
        """The crawl's admitted count, as the last run committed it."""
        raw = txn.get(ADMITTED_KEY, db=self._blobs)
        self.admitted = int.from_bytes(raw, "big") if raw is not None else 0

    def flush(self, txn: lmdb.Transaction[bytes]) -> None:
        """Write the admission counts the limits need, in the transaction that changed them:
        a resumed crawl then neither restarts crawl.max_pages nor max_pages_per_host (per-host
        counts are kept only while max_pages_per_host is set)."""
        blobs = self._blobs
        txn.put(ADMITTED_KEY, self.admitted.to_bytes(8, "big"), db=blobs)
        for host_key, host in self._counted.items():
            count = host.admitted.to_bytes(8, "big")
            txn.put(ADMITTED_PREFIX + host_key.encode(), count, db=blobs)
        self._counted.clear()

    def aborted(self) -> None:
        self._counted.clear()

    def connection_failed(self, host: HostQueue) -> None:
        """A connection failure: the host is retired after ``max_host_errors`` in a row."""
        if (
            self.max_host_errors
            and host.conn_errors >= self.max_host_errors
            and host.state is not HostState.RETIRED
        ):
            log.warning("%s: %d connection failures in a row: host retired", host.origin,
                        host.conn_errors)  # fmt: skip
            self.retire(host, HOST_UNREACHABLE)

    def retire(self, host: HostQueue, reason: str) -> None:
        """Give up on a host: every queued URL is recorded as failed with ``reason``."""
        self._queues.move(host, HostState.RETIRED)
        host.retired = reason
        self._dispatch.holding.release(host.origin)
        with self._tx_batch(), self._write() as txn:
            for key, entry in self._buffer.drain(host):
                self._reject_entry(host, key, entry, reason)
            revisits, host.revisits = host.revisits, None
            if revisits is not None:  # due again after a while
                self._put_back(txn, revisits)

    def _reject_entry(self, host: HostQueue, key: bytes, entry: QueueEntry, reason: str) -> None:
        ticket = Ticket(key, host.origin, entry.url, entry.depth, entry.hops, entry.attempt,
                        entry.referrer, False, entry.callback, entry.meta,
                        entry.priority)  # fmt: skip
        self._on_reject(ticket, reason)
        self._store.done(key)
