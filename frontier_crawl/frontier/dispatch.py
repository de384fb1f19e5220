"""Politeness dispatch: which hosts' requests start now, and when each host may start again.

A request start is taken only from a READY host (``HostQueues.take_ready``), and only while its
IP group (``per_ip``: hosts sharing one address share its budget) has a connection free and is
due (:meth:`Dispatch.group_holds`). Each start moves the host's ``next_at`` to ``start +
Spacing.start_gap``: the delay is a rate, so two starts to one host are never closer than it,
however many connections are open. Each end (:meth:`Dispatch.release`) frees the connection
and, with one connection per host (and always after robots.txt), moves ``next_at`` to at least
``end + delay``; a backoff or a Retry-After hold runs from the end too, and a host held beyond
its politeness delay is recorded in ``holding`` for the status (``status.py``).

``in_flight`` counts every request handed out and not yet released (robots.txt included).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from frontier_crawl.frontier.hosts import HostState, IpGroup
from frontier_crawl.frontier.status import Busiest, HeldHosts
from frontier_crawl.frontier.urls import host_of

if TYPE_CHECKING:
    from frontier_crawl.frontier.hosts import HostQueue, HostQueues
    from frontier_crawl.frontier.records import Ticket
    from frontier_crawl.frontier.robotsgate import RobotsGate
    from frontier_crawl.frontier.spacing import Spacing

#: a host's next ticket (robots.txt, a revisit, a retry or a queued URL), None if it has none
Take = Callable[["HostQueue", float], "Ticket | None"]


class Dispatch:
    """Request starts and ends over the host queues (see the module)."""

    __slots__ = ("_gate", "_groups", "_known_ips", "_per_ip", "_queues", "_spacing", "busiest",
                 "holding", "in_flight")  # fmt: skip

    def __init__(
        self,
        queues: HostQueues,
        spacing: Spacing,
        gate: RobotsGate,
        *,
        per_ip: bool,
        known_ips: Mapping[str, str],
    ) -> None:
        self._queues = queues
        self._spacing = spacing
        self._gate = gate  #: its robots.txt redirect hops go out first
        self._per_ip = per_ip
        self._known_ips = dict(known_ips)  #: host name -> address (``fetch.resolve``)
        self._groups: dict[str, IpGroup] = {}  #: address -> its group
        self.in_flight = 0
        #: hosts whose latest response held them beyond their politeness delay, and why;
        #: pruned once they are due (``status.HeldHosts``)
        self.holding = HeldHosts()
        self.busiest = Busiest()  #: the hosts with the most requests started (``status.py``)

    def join(self, host: HostQueue) -> None:
        """A new host joins the IP group of its known address (``per_ip``; else at its first
        response, :meth:`release`)."""
        if self._per_ip:
            ip = self._known_ips.get(host_of(host.origin))
            if ip is not None:
                host.group = self._groups.setdefault(ip, IpGroup())

    def join_all(self, hosts: Iterable[HostQueue]) -> None:
        """The hosts a restart built join their IP groups (nothing to do without ``per_ip``)."""
        if self._per_ip:
            for host in hosts:
                self.join(host)

    def hand_out(self, now: float, limit: int, take: Take) -> list[Ticket]:
        """Up to ``limit`` tickets: robots.txt redirect hops first, then one ``take`` of each
        ready host in FIFO order, each start spacing the host's (and its group's) next one."""
        queues = self._queues
        queues.wake(now)
        out: list[Ticket] = []
        hops = self._gate.hops
        while hops and len(out) < limit:  # the rest of a robots.txt fetch: in flight already
            out.append(hops.popleft())
        while len(out) < limit:
            host = queues.take_ready()  # BUSY now; settled again below
            if host is None:
                break
            if host.group is not None and self.group_holds(host, now):
                continue
            ticket = take(host, now)
            if ticket is not None:
                host.session += 1  # (its next READY puts it in the warm FIFO: hosts.py)
                out.append(ticket)
                self.in_flight += 1
                group = host.group
                if group is not None:
                    group.in_flight += 1
                if not ticket.robots or host.rules is not None:
                    # a page or a refresh of robots.txt: the delay is a rate, it spaces starts
                    if not ticket.robots:
                        host.starts += 1
                        self.busiest.started(host)
                    host.last_start = now
                    host.next_at = max(host.next_at, now + self._spacing.start_gap(host))
                    if group is not None:
                        group.next_at = max(group.next_at, host.next_at)
            queues.settle(host, now)
        return out

    def group_holds(self, host: HostQueue, now: float) -> bool:
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

    def release(
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

        ``ticket``: None for a robots.txt fetch the host waited for (not counted in the host's
        ``in_flight``). ``delay`` spaces request starts (from the end of this response, too,
        with one connection per host, and always after robots.txt); ``backoff`` and ``hold``
        run from the end of this response. Returns how long they hold the host beyond
        ``delay``.
        """
        if ticket is not None:
            host.in_flight -= 1
        self.in_flight -= 1
        host.delay_s = delay
        queues = self._queues
        after_end = ticket is None or queues.connections_per_host == 1
        polite = max(host.next_at, (now if after_end else host.last_start) + delay)
        host.next_at = max(polite, now + backoff, now + hold)
        group = host.group
        if group is not None:
            group.in_flight -= 1
            group.next_at = max(group.next_at, host.next_at)
            waiting, group.waiting = group.waiting, None
            for other in waiting or ():
                if other.state is HostState.BUSY:
                    queues.settle(other, now)
        elif self._per_ip and ip:
            # joins its IP's group now: the requests it still has in flight count there from now
            # on (they are subtracted when they end), this one never was
            host.group = self._groups.setdefault(ip, IpGroup())
            host.group.in_flight += host.in_flight + host.robots_in_flight
            host.group.next_at = max(host.group.next_at, host.next_at)
        if host.state is not HostState.READY:
            queues.settle(host, now)
        held = host.next_at - polite
        if held > 0:
            self.holding.hold(host, "retry-after" if hold > backoff else "backoff", now)
        elif self.holding:
            self.holding.release(host.origin)
        return held
