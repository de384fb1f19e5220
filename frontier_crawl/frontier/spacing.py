"""Politeness of one frontier's hosts: how far apart requests to a host start, and how long a
response holds it. The pure delays are ``politeness.py``'s; this holds what they are applied
with: the configured :class:`DelayPolicy` (replaced on a reload), the operator's delay per
host name (``control.py`` sets them) and ``host_error_urls``.

* :meth:`Spacing.start_gap`: the least time from a request's start to the host's next one;
* :meth:`Spacing.after`: (politeness delay, host backoff) after a response, counting the
  host's errors: only host-wide signals (429/503, connection failures, failures of
  ``host_error_urls`` distinct URLs in a row) back the whole host off;
* :meth:`Spacing.respace`: a host's next request moved by a change of its spacing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frontier_crawl.frontier.completion import Failure
from frontier_crawl.frontier.hosts import HostState
from frontier_crawl.frontier.politeness import DelayPolicy, delay_for, host_backoff
from frontier_crawl.frontier.urls import host_of

if TYPE_CHECKING:
    from frontier_crawl.frontier.hosts import HostQueue, HostQueues
    from frontier_crawl.frontier.records import Ticket


class Spacing:
    """The delays of one frontier's hosts (see the module). ``policy`` and
    ``host_error_urls`` are replaced by a reload; ``host_delays``: host name -> (delay, the
    policy it stands for), kept by ``control.Control``."""

    __slots__ = ("_floor", "_floor_of", "host_delays", "host_error_urls", "policy", "queues")

    def __init__(self, policy: DelayPolicy, host_error_urls: int, queues: HostQueues) -> None:
        self.policy = policy
        self.host_error_urls = host_error_urls
        self.queues = queues  #: the host queues a respaced host is settled again in
        self.host_delays: dict[str, tuple[float, DelayPolicy]] = {}
        #: ``delay_for(0.0, None, _floor_of)``, the delay of a host without a Crawl-delay
        #: under the policy ``_floor_of`` (checked by identity: a reload replaces the policy)
        self._floor_of: DelayPolicy | None = None
        self._floor = 0.0

    def _floor_for(self, p: DelayPolicy) -> float:
        """``delay_for(0.0, None, p)``, remembered for the last policy asked: every response
        of every host without a Crawl-delay asks it (and, with no ``delay_factor``, that is
        its delay whatever the fetch time: ``delay_for`` multiplies it by 0)."""
        if p is not self._floor_of:
            self._floor = delay_for(0.0, None, p)
            self._floor_of = p
        return self._floor

    def own(self, delay_s: float) -> DelayPolicy:
        """The policy of an operator's ``delay_s`` for a host: that delay, no adaptive part,
        the configured Crawl-delay cap and backoff."""
        p = self.policy
        return DelayPolicy(delay_s, delay_s, 0.0, p.max_crawl_delay_s, p.backoff_s,
                           p.max_backoff_s)  # fmt: skip

    def policy_of(self, host: HostQueue) -> DelayPolicy:
        """The operator's policy for the host's name if one is set, else the configured one."""
        if self.host_delays:
            own = self.host_delays.get(host_of(host.origin))
            if own is not None:
                return own[1]
        return self.policy

    def start_gap(self, host: HostQueue) -> float:
        """The least time from this request's start to the host's next one: the delay of its
        latest response, never below min_delay_s and the Crawl-delay (an operator's delay for
        the host replaces min_delay_s and the adaptive delay, never the Crawl-delay)."""
        crawl_delay = host.rules.crawl_delay_s if host.rules is not None else None
        if self.host_delays:
            own = self.host_delays.get(host_of(host.origin))
            if own is not None:
                return delay_for(0.0, crawl_delay, own[1])
        if crawl_delay is None:
            floor = self._floor_for(self.policy)
            return max(host.delay_s, floor)
        return max(host.delay_s, delay_for(0.0, crawl_delay, self.policy))

    def after(
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
            if len(host.failing) >= self.host_error_urls:
                host.failing = None
                host.errors += 1
                host_wide = True
        else:
            host.errors += 1
            host.conn_errors = host.conn_errors + 1 if failure is Failure.CONNECTION else 0
        crawl_delay = host.rules.crawl_delay_s if host.rules is not None else None
        p = self.policy_of(host)
        if crawl_delay is None and not p.delay_factor:
            polite = self._floor_for(p)
        else:
            polite = delay_for(fetch_s, crawl_delay, p)
        return polite, host_backoff(host.errors, self.policy) if host_wide else 0.0

    def respace(self, host: HostQueue, now: float) -> None:
        """Move a host's next request by the change of its spacing (not while backing off)."""
        if host.errors or host.state is HostState.RETIRED or host.next_at == 0.0:
            return  # backing off (that stays), retired, or never requested: nothing to move
        crawl_delay = host.rules.crawl_delay_s if host.rules is not None else None
        spacing = delay_for(0.0, crawl_delay, self.policy_of(host))  # adaptive: next response
        host.next_at += spacing - host.delay_s
        host.delay_s = spacing
        if host.state is HostState.SNOOZED or (
            host.state is HostState.READY and host.next_at > now
        ):
            self.queues.settle(host, now)  # snoozed anew: its FIFO or heap entry is stale
