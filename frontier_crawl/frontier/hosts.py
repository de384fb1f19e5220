"""Host queues: per-host scheduling facts, the tickets they hand out, and the one transition.

A host (origin) is in exactly one :class:`HostState`. READY hosts wait in two FIFOs, SNOOZED
hosts in a heap ordered by wake time, BUSY hosts (all connections used, or robots.txt in flight) in
neither, so a waiting host never holds a fetch slot; BLOCKED hosts (an operator's block) are
parked; RETIRED is final.

:meth:`HostQueues.move` is the only place that assigns ``HostQueue.state``, and the only place
that keeps the count of hosts in each state (the status reads them without a scan), the FIFO,
the heap and the parked set; :meth:`HostQueues.restore` is its bulk form for the hosts a
restart builds (each placed as :meth:`HostQueues.settle` would place it).

**Warm hosts first.** A host in the middle of a *session* (it has had a request handed out
lately, fewer than SESSION_REQUESTS in a row) waits in the ``warm`` FIFO, taken before the
``ready`` one of hosts starting a session (new hosts, hosts of a restart, hosts whose session
ran out). A broad crawl knows far more ready hosts than it has fetch slots; with one FIFO, a host
came back only after every other ready host had been served, long after its connection and its
DNS entry were gone, so every request, the first page after robots.txt included, paid a DNS
lookup and a new connection. Warm first, a host's next request (after its politeness delay, as
always) finds both, and new hosts take the slots warm ones leave free. The session's cap keeps a
few large hosts from keeping the rest out: their sessions end, and they queue behind the hosts
that wait to start one.
:meth:`HostQueues.settle` decides where a host's facts say it belongs (queued work, connections
in use, its wake time, a block) and moves it there. FIFO and heap entries are not removed when
a host moves on: an entry is stale unless the host is still in that state (and, in the heap,
with that wake time), and is skipped when it comes out.
"""

from __future__ import annotations

import gc
import heapq
import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from frontier_crawl.frontier.identity import StateMismatch
from frontier_crawl.frontier.records import Ticket as Ticket  # (re-exported)
from frontier_crawl.frontier.urls import host_of

if TYPE_CHECKING:
    from frontier_crawl.frontier.recrawl import HostRevisits
    from frontier_crawl.frontier.robots import Rules
    from frontier_crawl.frontier.store import QueueEntry


class HostState(Enum):
    """Where a host queue is in the scheduler."""

    EMPTY = "empty"  #: nothing queued (requests may still be in flight)
    READY = "ready"  #: queued work, politeness slot open: in the ready FIFO
    SNOOZED = "snoozed"  #: queued work, waiting for its wake time: in the heap
    BUSY = "busy"  #: queued work, every connection in use (or robots.txt in flight)
    BLOCKED = "blocked"  #: queued work held by an operator's block (``block``): parked
    RETIRED = "retired"  #: given up; URLs recorded as failed, new ones refused

    #: members are singletons compared by identity: hashed by identity too, in C (Enum's own
    #: ``__hash__`` is Python code, run for every count kept by ``HostQueues.move``)
    __hash__ = object.__hash__


@dataclass(slots=True, eq=False)
class IpGroup:
    """Hosts sharing one IP address share its politeness budget (``per_ip``)."""

    next_at: float = 0.0
    in_flight: int = 0  #: every in-flight request of its hosts (counted from when they join)
    waiting: list[HostQueue] | None = None  #: hosts parked while every connection is in use


@dataclass(slots=True, eq=False)
class HostQueue:
    """Per-host scheduling facts. Small on purpose: there may be millions of hosts.

    ``state`` is read by anyone and assigned only by :meth:`HostQueues.move`.
    """

    origin: str
    hid: int = -1  #: the store's host id (-1 until the host's first URL is queued)
    state: HostState = HostState.EMPTY
    #: the head of the host's queue held in memory, from ``hot[head]`` on (a list sized to its
    #: entries and an index rather than a deque, hundreds of bytes even when nearly empty);
    #: None when nothing is held
    hot: list[tuple[bytes, QueueEntry]] | None = None
    unloaded: int = 0  #: entries in LMDB after ``loaded_upto``, not held in memory
    #: every unfinished entry up to this key is held in memory (``hot``, in flight, retries)
    loaded_upto: bytes | None = None
    head: int = 0  #: entries of ``hot`` before it are taken (dropped once they are half)
    in_flight: int = 0
    next_at: float = 0.0  #: monotonic time before which no request may start
    wake_at: float = 0.0  #: when SNOOZED: the wake time of its heap entry
    last_start: float = 0.0  #: when the latest request to the host started
    delay_s: float = 0.0  #: politeness delay from the latest response (spaces request starts)
    starts: int = 0  #: requests started to the host (this run)
    took_retry: bool = False  #: the latest request taken was a retry
    #: URLs waiting for their retry: (due, seq, key, entry, starts), a heap by due time. One is
    #: taken once due, once ``starts`` requests have started to the host (another URL went
    #: first) and when the latest one taken was not a retry, so retries take at most every
    #: other request of a host that has other URLs queued; or when nothing else is queued.
    #: None when empty.
    retries: list[tuple[float, int, bytes, QueueEntry, int]] | None = None
    rules: Rules | None = None  #: robots.txt rules, None while unknown (or dropped when idle)
    #: a robots.txt fetch the host waits for (its rules unknown) is in flight; a refresh, which
    #: the host does not wait for, is not flagged here but counted in ``in_flight``
    robots_in_flight: bool = False
    robots_attempts: int = 0  #: robots.txt fetches in a row that found it unreachable
    errors: int = 0  #: consecutive 429/5xx/connection failures
    conn_errors: int = 0  #: consecutive DNS/connection failures
    failing: set[bytes] | None = None  #: distinct URLs failed in a row (Failure.URL)
    admitted: int = 0  #: URLs admitted, all runs (for max_pages_per_host)
    group: IpGroup | None = None
    retired: str = ""  #: why the host was retired (the outcome of its URLs)
    revisits: HostRevisits | None = None  #: due revisits in memory (continuous crawls only)
    #: requests handed out in the host's current session (0: none yet, it starts one when next
    #: taken); READY within a session, it waits in the warm FIFO (module docstring)
    session: int = 0

    @property
    def queued(self) -> int:
        return (
            (len(self.hot) - self.head if self.hot else 0)
            + self.unloaded
            + (len(self.retries) if self.retries else 0)
            + (len(self.revisits) if self.revisits is not None else 0)
        )

    def due(self) -> float:
        """When the host may issue its next request, queued work permitting: its politeness
        time, or later when all it has left are retries (or retried revisits) not yet due."""
        if self.hot or self.unloaded:
            return self.next_at
        first = self.retries[0][0] if self.retries else math.inf
        if self.revisits is not None:
            first = min(first, self.revisits.ready_at())
        return self.next_at if first == math.inf else max(self.next_at, first)


#: requests in a row a host may have before it waits behind the hosts starting a session
SESSION_REQUESTS = 100


class HostQueues:
    """Every host queue of one frontier, by origin, and where each one waits.

    ``connections_per_host`` and ``blocked`` (host names the operator blocked) are the two
    settings :meth:`settle` places hosts by; the frontier changes them in place.
    """

    __slots__ = ("_counts", "_seq", "blocked", "connections_per_host", "hosts", "parked",
                 "ready", "snoozed", "warm")  # fmt: skip

    def __init__(self, connections_per_host: int) -> None:
        self.connections_per_host = connections_per_host
        self.blocked: set[str] = set()  #: host names held by an operator's block
        self.hosts: dict[str, HostQueue] = {}  #: origin -> its queue (read freely; add: add)
        #: READY hosts starting a session, in FIFO order (stale entries too)
        self.ready: deque[HostQueue] = deque()
        #: READY hosts within a session, in FIFO order (stale entries too), taken first
        self.warm: deque[HostQueue] = deque()
        #: SNOOZED hosts: (wake time, seq, host), a heap (stale entries too)
        self.snoozed: list[tuple[float, int, HostQueue]] = []
        self.parked: dict[str, HostQueue] = {}  #: BLOCKED hosts, by origin
        self._seq = 0
        self._counts: dict[HostState, int] = dict.fromkeys(HostState, 0)

    # ----------------------------------------------------------------------------- the hosts

    def host_id_of(self, host_key: str) -> int:
        """The store's id of a host (-1 if it has none yet): referrers are stored by it."""
        host = self.hosts.get(host_key)
        return host.hid if host is not None else -1

    def add(self, host: HostQueue) -> HostQueue:
        """Count in a new host queue (EMPTY, as built)."""
        assert host.state is HostState.EMPTY and host.origin not in self.hosts
        self.hosts[host.origin] = host
        self._counts[HostState.EMPTY] += 1
        return host

    def restore(self, rows: Iterable[tuple[int, str | None, int]]) -> list[HostQueue]:
        """Build and place the hosts of a restart: ``rows`` is (host id, origin, URLs queued
        in LMDB) per host (``QueueStore.iter_queued_hosts``), none in memory or in flight, none
        known yet. Each is counted in as by :meth:`add` and placed where :meth:`settle` at
        time 0 places it (its ``next_at`` is 0, as a host built at a restart always had):
        READY at the end of the FIFO in row order, or, for a blocked name or no URL, by
        :meth:`settle` itself. Returns the hosts built, in row order.

        At 10^6 hosts this is most of a reopen, so a READY host costs one constructor call,
        a dict store and an append, and the counts are added once (this and :meth:`move` are
        the only places that assign ``state``). The cyclic garbage collector is paused while
        the hosts are built and enabled again after (if it was): 10^6 new tracked objects
        would run it ~1,400 times, young passes and some over every object, measured at ~70%
        of the cost of building a host. Raises ``StateMismatch`` for a row without an origin
        (a queue block of an unknown host id) or an origin under two host ids."""
        hosts = self.hosts
        before = len(hosts)
        built: list[HostQueue] = []
        later: list[HostQueue] = []  # blocked, or nothing queued: placed by settle
        append, ready = built.append, self.ready.append
        blocked = self.blocked
        READY = HostState.READY
        enabled = gc.isenabled()
        gc.disable()
        try:
            for hid, origin, count in rows:
                if origin is None:
                    raise StateMismatch(f"queue block of unknown host id {hid}")
                if count > 0 and not (blocked and host_of(origin) in blocked):
                    # positional (keywords cost ~0.14 us more per host): origin, hid, state,
                    # hot, unloaded; mypy and test_restore_places_hosts_... catch a reorder
                    host = HostQueue(origin, hid, READY, None, count)
                    ready(host)
                else:
                    host = HostQueue(origin, hid)
                    host.unloaded = count
                    later.append(host)
                hosts[origin] = host
                append(host)
        finally:
            if enabled:
                gc.enable()
        if len(hosts) != before + len(built):
            raise StateMismatch("a host's origin is stored under two host ids")
        counts = self._counts
        counts[READY] += len(built) - len(later)
        counts[HostState.EMPTY] += len(later)
        for host in later:
            self.settle(host, 0.0)
        return built

    def __len__(self) -> int:
        return len(self.hosts)

    def __iter__(self) -> Iterator[HostQueue]:
        return iter(self.hosts.values())

    def count(self, state: HostState) -> int:
        """Hosts in ``state`` now (kept by :meth:`move`: no scan)."""
        return self._counts[state]

    def recount(self) -> dict[HostState, int]:
        """The hosts in each state, counted afresh (a scan: for checks and tests)."""
        counts = dict.fromkeys(HostState, 0)
        for host in self.hosts.values():
            counts[host.state] += 1
        return counts

    # ----------------------------------------------------------------------------- transitions

    def move(self, host: HostQueue, new: HostState, wake: float = 0.0) -> None:
        """The one transition: put ``host`` in state ``new`` (``wake``: its wake time, when
        SNOOZED), keeping the counts, the ready FIFO, the snoozed heap and the parked set.

        RETIRED is final: a retired host stays so. READY to READY keeps its place in the FIFO;
        SNOOZED to SNOOZED pushes a new heap entry (the old one is stale by its wake time).
        """
        old = host.state
        if old is HostState.RETIRED:
            return
        if new is not old:
            counts = self._counts
            counts[old] -= 1
            counts[new] += 1
            if old is HostState.BLOCKED:
                self.parked.pop(host.origin, None)
        if new is HostState.READY:
            if old is not HostState.READY:
                if 0 < host.session < SESSION_REQUESTS:
                    self.warm.append(host)
                else:
                    host.session = 0
                    self.ready.append(host)
        elif new is HostState.SNOOZED:
            host.wake_at = wake
            self._seq += 1
            heapq.heappush(self.snoozed, (wake, self._seq, host))
        elif new is HostState.BLOCKED:
            self.parked[host.origin] = host
        host.state = new

    def settle(self, host: HostQueue, now: float) -> None:
        """Place a host where its facts say it belongs (a retired host stays retired)."""
        if host.state is HostState.RETIRED:
            return
        wake = 0.0
        if host.robots_in_flight or host.in_flight >= self.connections_per_host:
            new = HostState.BUSY
        elif host.queued == 0:
            new = HostState.EMPTY
            if host.in_flight == 0:
                host.rules = None  # idle: keep no parsed robots.txt (re-read from the disk cache)
        elif self.blocked and host_of(host.origin) in self.blocked:
            new = HostState.BLOCKED
        else:
            wake = host.due()
            new = HostState.READY if wake <= now else HostState.SNOOZED
        self.move(host, new, wake)

    def take_ready(self) -> HostQueue | None:
        """The next READY host, warm ones first (module docstring), now BUSY (the caller
        settles it again once it has taken its ticket); None when no host is ready."""
        for fifo in (self.warm, self.ready):
            while fifo:
                host = fifo.popleft()
                if host.state is HostState.READY:  # else stale: it moved on since it was queued
                    self.move(host, HostState.BUSY)
                    return host
        return None

    def wake(self, now: float) -> None:
        """Settle every snoozed host whose wake time has come."""
        heap = self.snoozed
        while heap and heap[0][0] <= now:
            wake, _, host = heapq.heappop(heap)
            if host.state is HostState.SNOOZED and wake == host.wake_at:
                self.settle(host, now)

    def first_snoozed(self) -> HostQueue | None:
        """The snoozed host due first (stale heap entries dropped on the way), or None."""
        heap = self.snoozed
        while heap:
            wake, _, host = heap[0]
            if host.state is HostState.SNOOZED and wake == host.wake_at:
                return host
            heapq.heappop(heap)  # stale entry
        return None

    @property
    def has_ready(self) -> bool:
        """Is either ready FIFO non-empty (they may hold only stale entries)?"""
        return bool(self.warm) or bool(self.ready)
