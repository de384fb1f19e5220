"""What the frontier's hosts are doing, for the status and the report: read from the host
queues and their counts, never a write to LMDB or to a host's scheduling facts.

* :func:`host_signals`: hosts by state (the counts :meth:`HostQueues.move` keeps: no scan of
  all hosts), the hosts held longest by a Retry-After or a backoff, and the next one due;
* :func:`busiest`: the hosts with the most requests started (a scan: callers space it out);
* :class:`FrontierView`: the frontier read, never written (``Frontier.view``): its counts, the
  two above, the seen-set's and the revisit schedule's figures.

``holding`` is the completion's record of hosts a response held beyond their politeness delay
(origin -> (host, "retry-after" or "backoff")); :func:`host_signals` drops the entries of hosts
that are due again or retired (a prune of that in-memory index, nothing else changes).
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

#: origin -> (host, "retry-after" or "backoff"): hosts held beyond their politeness delay
Holding = dict[str, tuple[HostQueue, str]]


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
    holding: Holding,
    robots_waiting: int,
    min_delay_s: float,
    now: float,
    worst: int = 5,
) -> HostSignals:
    """Hosts by state, the ``worst`` held longest and the next one due: O(held hosts).
    ``min_delay_s``: the configured delay (a Crawl-delay above it names the wait)."""
    counts = {state: queues.count(state) for state in HostState}
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
        robots=robots_waiting,
        blocked=counts[HostState.BLOCKED],
        retired=counts[HostState.RETIRED],
        worst=tuple(heapq.nlargest(worst, held, key=lambda h: h[2])),
        next_due=next_due(queues, holding, min_delay_s, now),
    )


def next_due(
    queues: HostQueues, holding: Holding, min_delay_s: float, now: float
) -> tuple[str, str, float] | None:
    """The snoozed host due first: (origin, why it waits, seconds until it is due)."""
    host = queues.first_snoozed()  # (Frontier.next_wake also covers revisits not yet due)
    if host is None:
        return None
    held = holding.get(host.origin)
    if held is not None:
        reason = held[1]
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


def busiest(queues: HostQueues, n: int = 10) -> list[tuple[str, int, int]]:
    """The ``n`` hosts with the most requests started this run: (origin, started, queued).
    A scan of every host: callers space it out (the engine's status, every few seconds)."""
    top = heapq.nlargest(n, queues.hosts.values(), key=lambda h: (h.starts, h.queued))
    return [(h.origin, h.starts, h.queued) for h in top if h.starts or h.queued]


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
        """The ``n`` hosts with the most requests started this run (:func:`busiest`)."""
        return busiest(self._queues, n)

    def seen_stats(self) -> dict[str, float | int]:
        """The seen-set's counters (Bloom filter size, estimated false positives...)."""
        return self._seen_stats()

    def freshness(self, now_wall: float) -> dict[str, object]:
        """The schedule's figures (the ``freshness`` dict of docs/continuous.md without
        ``per_hour``, which observe computes from the visit totals); ``{"enabled": False}``
        without recrawl. Counts due keys up to a cap: call it every few seconds, not per tick."""
        return self._revisits.freshness(now_wall)
