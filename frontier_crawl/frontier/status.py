"""What the frontier's hosts are doing, for the status and the report: read from the host
queues and their counts, never a write to LMDB or to a host's scheduling facts.

* :func:`host_signals`: hosts by state (the counts :meth:`HostQueues.move` keeps: no scan of
  all hosts), the hosts held longest by a Retry-After or a backoff, and the next one due;
* :func:`busiest`: the hosts with the most requests started (a scan: callers space it out).

``holding`` is the completion's record of hosts a response held beyond their politeness delay
(origin -> (host, "retry-after" or "backoff")); :func:`host_signals` drops the entries of hosts
that are due again or retired (a prune of that in-memory index, nothing else changes).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from frontier_crawl.frontier.hosts import HostQueue, HostQueues, HostState

#: origin -> (host, "retry-after" or "backoff"): hosts held beyond their politeness delay
Holding = dict[str, tuple[HostQueue, str]]


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
