"""What the frontier's hosts are doing, for the status and the report: read from the host
queues and their counts, never a write to LMDB or to a host's scheduling facts. Nothing here
scans every host, or every held one: the status is as cheap at 10^6 hosts as at 10.

* :func:`host_signals`: hosts by state (the counts :meth:`HostQueues.move` keeps), the hosts
  held longest by a Retry-After or a backoff (:class:`HeldHosts`), and the next one due;
* :class:`Busiest`: the hosts with the most requests started, kept as requests start;
* :class:`FrontierView`: the frontier read, never written (``Frontier.view``): its counts, the
  two above, the seen-set's and the revisit schedule's figures.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frontier_crawl.frontier.hosts import HostQueue, HostQueues, HostState

if TYPE_CHECKING:
    from frontier_crawl.frontier.buffer import QueueBuffer
    from frontier_crawl.frontier.control import Control
    from frontier_crawl.frontier.dispatch import Dispatch
    from frontier_crawl.frontier.intake import Intake
    from frontier_crawl.frontier.revisits import RevisitStrategy
    from frontier_crawl.frontier.robotsgate import RobotsGate
    from frontier_crawl.frontier.spacing import Spacing

#: most heap entries :meth:`HeldHosts.worst` looks at (held hosts doing something else meanwhile,
#: busy or with nothing queued, are passed over; past this many it answers with what it found)
WORST_LOOKED_AT = 1024
_PRUNED_PER_HOLD = 2  #: heap entries :meth:`HeldHosts.hold` prunes at most (more than it adds)


class HeldHosts:
    """The hosts a response held beyond their politeness delay (``Dispatch.release``): origin
    -> (host, "retry-after" or "backoff"), with two heaps of (time held until, origin) that
    let the status prune the ones due again (:meth:`prune`, earliest first) and name the ones
    held longest (:meth:`worst`, latest first) without a scan of every held host. A heap
    entry whose hold was replaced or released is stale: skipped when met, and the heaps are
    rebuilt once stale entries are the most of them."""

    __slots__ = ("_by_origin", "_due", "_far")

    def __init__(self) -> None:
        #: origin -> (host, reason, the host's ``next_at`` when held: a heap entry's key)
        self._by_origin: dict[str, tuple[HostQueue, str, float]] = {}
        self._due: list[tuple[float, str]] = []  #: (until, origin): earliest first
        self._far: list[tuple[float, str]] = []  #: (-until, origin): latest first

    def __len__(self) -> int:
        return len(self._by_origin)

    def hold(self, host: HostQueue, reason: str, now: float) -> None:
        """``host`` is held until its ``next_at`` by ``reason``; a couple of holds due by
        ``now`` are pruned on the way, so the holds stay those not yet due even when no one
        asks for a status for a long time."""
        until = host.next_at
        self._by_origin[host.origin] = (host, reason, until)
        self._push(until, host.origin)
        self.prune(now, _PRUNED_PER_HOLD)

    def release(self, origin: str) -> None:
        """``origin`` is held no longer (a response that meant it, or retired)."""
        self._by_origin.pop(origin, None)

    def reason(self, origin: str) -> str | None:
        """Why ``origin`` is held (None: it is not)."""
        entry = self._by_origin.get(origin)
        return entry[1] if entry is not None else None

    def prune(self, now: float, most: int = -1) -> None:
        """Drop the holds of hosts due again (or retired): the earliest heap entries only (at
        most ``most`` of them; -1: every one due)."""
        due, by_origin = self._due, self._by_origin
        while due and due[0][0] <= now and most != 0:
            most -= 1
            until, origin = heapq.heappop(due)
            entry = by_origin.get(origin)
            if entry is None or entry[2] != until:
                continue  # stale: replaced or released since
            host = entry[0]
            if host.next_at <= now or host.state is HostState.RETIRED:
                del by_origin[origin]
            else:  # held on by a later start's spacing: keep it, keyed by the new time
                by_origin[origin] = (host, entry[1], host.next_at)
                self._push(host.next_at, origin)

    def worst(self, now: float, n: int) -> list[tuple[str, str, float]]:
        """The ``n`` snoozed hosts held longest: (origin, reason, seconds still held), longest
        first (a walk of the heap's top, at most ``WORST_LOOKED_AT`` entries)."""
        far, by_origin = self._far, self._by_origin
        found: list[tuple[str, str, float]] = []
        frontier = [(far[0], 0)] if far else []
        looked = 0
        while frontier and len(found) < n and looked < WORST_LOOKED_AT:
            (key, origin), i = heapq.heappop(frontier)
            looked += 1
            entry = by_origin.get(origin)
            if entry is not None and entry[2] == -key and entry[0].state is HostState.SNOOZED:
                found.append((origin, entry[1], entry[0].next_at - now))
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(far):
                    heapq.heappush(frontier, (far[child], child))
        return found

    def _push(self, until: float, origin: str) -> None:
        heapq.heappush(self._due, (until, origin))
        heapq.heappush(self._far, (-until, origin))
        if len(self._due) > 2 * len(self._by_origin) + 64:  # mostly stale entries: rebuild
            self._due = [(e[2], o) for o, e in self._by_origin.items()]
            self._far = [(-e[2], o) for o, e in self._by_origin.items()]
            heapq.heapify(self._due)
            heapq.heapify(self._far)


@dataclass(slots=True, frozen=True)
class HostSignals:
    """Hosts by state for the status (``FrontierView.host_signals``)."""

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


def host_signals(
    queues: HostQueues,
    holds: HeldHosts,
    robots_waiting: int,
    min_delay_s: float,
    now: float,
    worst: int = 5,
) -> HostSignals:
    """Hosts by state, the ``worst`` held longest and the next one due, without a scan of the
    hosts. ``min_delay_s``: the configured delay (a Crawl-delay above it names the wait)."""
    counts = {state: queues.count(state) for state in HostState}
    holds.prune(now)
    snoozed = counts[HostState.SNOOZED]
    held = min(len(holds), snoozed)  # held hosts not yet due (most snoozed; some busy or idle)
    return HostSignals(
        total=counts[HostState.READY]
        + snoozed
        + counts[HostState.BUSY]
        + counts[HostState.BLOCKED],
        ready=counts[HostState.READY],
        waiting=max(0, snoozed - held),
        backoff=held,
        robots=robots_waiting,
        blocked=counts[HostState.BLOCKED],
        retired=counts[HostState.RETIRED],
        worst=tuple(holds.worst(now, worst)),
        next_due=next_due(queues, holds, min_delay_s, now),
    )


def next_due(
    queues: HostQueues, holds: HeldHosts, min_delay_s: float, now: float
) -> tuple[str, str, float] | None:
    """The snoozed host due first: (origin, why it waits, seconds until it is due)."""
    host = queues.first_snoozed()  # (Frontier.next_wake also covers revisits not yet due)
    if host is None:
        return None
    held = holds.reason(host.origin)
    if held is not None:
        reason = held
    elif host.due() > host.next_at:
        reason = "retry"
    elif (
        host.rules is not None
        and host.rules.crawl_delay_s is not None
        and host.rules.crawl_delay_s >= host.delay_s
        and host.rules.crawl_delay_s > min_delay_s
    ):
        reason = "crawl-delay"
    else:
        reason = "delay"
    return host.origin, reason, max(0.0, host.wake_at - now)


class Busiest:
    """The ``kept`` hosts with the most requests started this run, kept as each request starts
    (:meth:`started`), so the status reads them without a scan of every host.

    Exact for the top ``kept``: a host's count only grows, one at a time, so a host outside
    the kept ones never has more starts than the least of them, and overtakes it only by a
    start of its own, when it takes that one's place (ties keep the one already kept).
    """

    __slots__ = ("_floor", "_kept", "_top")

    def __init__(self, kept: int = 32) -> None:
        self._kept = kept
        self._top: dict[str, HostQueue] = {}  #: origin -> host, the busiest
        self._floor = 0  #: the fewest starts among them once full (0 until then)

    def started(self, host: HostQueue) -> None:
        """``host`` started a request (its ``starts`` counted already)."""
        if host.starts <= self._floor:
            return
        top = self._top
        if host.origin in top:
            if host.starts - 1 > self._floor or len(top) < self._kept:
                return  # the least of them is another host: the floor stands
        else:
            if len(top) >= self._kept:
                least = min(top.values(), key=_starts)
                del top[least.origin]
            top[host.origin] = host
        if len(top) >= self._kept:
            self._floor = min(map(_starts, top.values()))

    def top(self, n: int = 10) -> list[tuple[str, int, int]]:
        """The ``n`` (at most ``kept``) hosts with the most requests started: (origin,
        started, queued), most first."""
        rows = heapq.nlargest(n, self._top.values(), key=lambda h: (h.starts, h.queued))
        return [(h.origin, h.starts, h.queued) for h in rows]


def _starts(host: HostQueue) -> int:
    return host.starts


class FrontierView:
    """The frontier read, never written: what the status, the report and the tests read of it
    (``Frontier.view``). ``seen_stats``: the seen-set's counters (``SeenSet.stats``)."""

    __slots__ = ("_buffer", "_dispatch", "_gate", "_holds", "_intake", "_queues", "_revisits",
                 "_seen_stats", "_spacing", "resumed")  # fmt: skip

    def __init__(
        self,
        queues: HostQueues,
        buffer: QueueBuffer,
        dispatch: Dispatch,
        gate: RobotsGate,
        spacing: Spacing,
        holds: Control,
        intake: Intake,
        revisits: RevisitStrategy,
        seen_stats: Callable[[], dict[str, float | int]],
    ) -> None:
        self._queues = queues
        self._buffer = buffer
        self._dispatch = dispatch
        self._gate = gate
        self._spacing = spacing
        self._holds = holds
        self._intake = intake
        self._revisits = revisits
        self._seen_stats = seen_stats
        self.resumed = 0  #: URLs found queued in LMDB at start (an earlier run's work)

    @property
    def admitted(self) -> int:
        """URLs admitted by this crawl, all runs (for crawl.max_pages)."""
        return self._intake.admitted

    @property
    def queued(self) -> int:
        """URLs admitted and not yet complete, in flight excluded."""
        return self._buffer.queued

    @property
    def hot_total(self) -> int:
        """URLs held in memory (under ``memory_urls``)."""
        return self._buffer.hot_total

    @property
    def peak_hot(self) -> int:
        """The most URLs held in memory at once."""
        return self._buffer.peak_hot

    @property
    def spilled(self) -> int:
        """URLs that went to LMDB only, past the memory budget."""
        return self._buffer.spilled

    @property
    def refilled(self) -> int:
        """URLs read back from LMDB into memory."""
        return self._buffer.refilled

    @property
    def in_flight(self) -> int:
        """Requests handed out and not yet complete (robots.txt included)."""
        return self._dispatch.in_flight

    @property
    def robots_waiting(self) -> int:
        """Hosts waiting for their robots.txt (nothing else issued)."""
        return self._gate.waiting

    @property
    def continuous(self) -> bool:
        """A continuous crawl (``[recrawl] enabled``): it never ends by itself."""
        return self._revisits.continuous

    def host_state(self, host_key: str) -> HostState | None:
        """State of a host queue (for tests and progress)."""
        host = self._queues.hosts.get(host_key)
        return host.state if host is not None else None

    def stats(self) -> dict[str, float | int]:
        """Counters for the report and progress lines."""
        return {
            "hosts": len(self._queues.hosts),
            "queued": self.queued,
            "in_flight": self.in_flight,
            "admitted": self.admitted,
            "resumed": self.resumed,
            "hot": self.hot_total,
            "peak_hot": self.peak_hot,
            "spilled": self.spilled,
            "refilled": self.refilled,
            "blocked_hosts": len(self._queues.blocked),
            "held_by_blocks": self._holds.held_by_blocks,
        }

    def host_signals(self, now: float, worst: int = 5) -> HostSignals:
        """Hosts by state, the worst held ones and the next one due (:func:`host_signals`)."""
        return host_signals(self._queues, self._dispatch.holding, self._gate.waiting,
                            self._spacing.policy.min_delay_s, now, worst)  # fmt: skip

    def busiest(self, n: int = 10) -> list[tuple[str, int, int]]:
        """The ``n`` hosts with the most requests started this run (:class:`Busiest`):
        (origin, started, queued), most first; no scan of every host."""
        return self._dispatch.busiest.top(n)

    def seen_stats(self) -> dict[str, float | int]:
        """The seen-set's counters (``SeenSet.stats``: URLs in it, recent-cache hits)."""
        return self._seen_stats()

    def freshness(self, now_wall: float) -> dict[str, object]:
        """The schedule's figures (the ``freshness`` dict of docs/continuous.md without
        ``per_hour``, which observe computes from the visit totals); ``{"enabled": False}``
        without recrawl. Counts due keys up to a cap: call it every few seconds, not per tick."""
        return self._revisits.freshness(now_wall)
