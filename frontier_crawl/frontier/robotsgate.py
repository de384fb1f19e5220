"""The robots.txt states of a host: the gate every host passes before its first URL.

robots.txt is the first request to every host (a robots :class:`Ticket`), unless a fresh copy
is in the disk cache (``robots.py``'s :class:`RobotsCache`). Until it is known the host issues
nothing else (``HostQueue.robots_in_flight``; :attr:`RobotsGate.waiting` counts those hosts).
Once its rules are ``ttl_s`` old (24 h at most, RFC 9309 2.4) they are refreshed: robots.txt
takes the host's next request slot and its other slots go on with the old rules meanwhile.
While robots.txt is unreachable (429, 5xx, no answer) the copy at hand, or an out-of-date one
from the disk cache (kept in ``stale`` while its fetch is in flight), stands in for up to
``stale_s`` past its TTL, and the fetch is retried with an exponential delay
(:meth:`RobotsGate.answer`); after ``attempts`` such fetches without a usable copy the host is
given up.

Redirects of robots.txt are followed here, hop by hop (:meth:`RobotsGate.redirect`): the
target must be canonical and inside the allowed domains, and is handed out as the host's next
robots ticket (``hops`` + 1) first at the next ``next_ready`` (``hops``), the host still
waiting. The engine stops after five hops (RFC 9309 2.3.1.2) and treats a chain it stops
following (more hops, a target out of scope, or refused by the address policy) as
"unavailable".

The gate decides; the frontier applies: :meth:`RobotsGate.answer` returns a
:class:`RobotsAnswer` (the rules now in force, the Crawl-delay to space the host by, how long
to wait before the next fetch, or that the host is to be retired), and the frontier releases
or retires the host.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from frontier_crawl.frontier.records import Ticket
from frontier_crawl.frontier.robots import MAX_ROBOTS_TTL_S, Rules
from frontier_crawl.frontier.urls import canonicalize

if TYPE_CHECKING:
    from frontier_crawl.frontier.hosts import HostQueue
    from frontier_crawl.frontier.robots import RobotsCache

log = logging.getLogger(__name__)

ALLOW_ALL = Rules("", None)  #: the rules of every host when robots.txt is not obeyed


class RobotsAnswer(NamedTuple):
    """What a robots.txt fetch decided for its host (:meth:`RobotsGate.answer`)."""

    rules: Rules | None  #: newly fetched rules (None: unreachable, or robots.txt not obeyed)
    crawl_delay_s: float | None  #: the Crawl-delay of the rules the host goes on with
    retry_s: float  #: hold the host this long from the end of the response
    give_up: bool  #: no usable copy and no attempt left: retire the host (robots-unavailable)


class RobotsGate:
    """robots.txt of one frontier's hosts (see the module). ``allowed``: is a canonical URL's
    host inside the allowed domains, on a port in scope (a redirect's target must be)."""

    __slots__ = ("_allowed", "attempts", "cache", "hops", "obey", "retry_s", "stale",
                 "stale_s", "ttl_s", "waiting")  # fmt: skip

    def __init__(
        self,
        cache: RobotsCache,
        allowed: Callable[[str], bool],
        *,
        obey: bool,
        ttl_s: float,
        stale_s: float,
        retry_s: float,
        attempts: int,
    ) -> None:
        self.cache = cache
        self._allowed = allowed
        self.obey = obey
        self.ttl_s = min(ttl_s, MAX_ROBOTS_TTL_S)
        self.stale_s = stale_s
        self.retry_s = retry_s  #: the first retry's delay (doubled for each next attempt)
        self.attempts = attempts  #: fetches in a row without a usable copy before giving up
        #: hosts whose robots.txt is being fetched with only an out-of-date copy at hand: that
        #: copy, used if the fetch finds robots.txt unreachable (:meth:`answer`)
        self.stale: dict[str, Rules] = {}
        #: robots.txt redirect hops to hand out first (:meth:`redirect`); their fetch is still
        #: counted in flight, as the host's robots.txt fetch
        self.hops: deque[Ticket] = deque()
        self.waiting = 0  #: hosts waiting for their robots.txt (nothing else issued)

    def known_rules(self, host: HostQueue, now: float) -> Rules | None:
        """The rules a host without any goes on with: all allowed when robots.txt is not
        obeyed, else fresh ones from the disk cache; None if robots.txt must be fetched first
        (an out-of-date copy is kept in ``stale`` as that fetch's fallback)."""
        if not self.obey:
            return ALLOW_ALL
        hit = self.cache.get(host.origin)
        if hit is None:
            return None
        rules, age = hit
        self.time_rules(rules, now - age)
        if age < self.ttl_s:
            return rules
        if rules.usable_until > now:
            self.stale[host.origin] = rules
        return None

    def time_rules(self, rules: Rules, fetched: float) -> None:
        """Set when rules fetched at (monotonic) ``fetched`` are due again, and until when
        they may stand in for an unreachable robots.txt."""
        rules.refresh_at = fetched + self.ttl_s
        # without a stale allowance the two are one float (24 bytes less a host)
        rules.usable_until = rules.refresh_at + self.stale_s if self.stale_s else rules.refresh_at

    def first_fetch(self, host: HostQueue) -> Ticket:
        """The host's robots.txt ticket, which it waits for (nothing else is issued)."""
        host.robots_in_flight = True
        self.waiting += 1
        return Ticket(b"", host.origin, host.origin + "/robots.txt", 0, robots=True)

    def refresh(self, host: HostQueue, now: float) -> Ticket | None:
        """A fetch of robots.txt again in this request slot if the host's rules are due (its
        other slots go on with these rules meanwhile); None if they are not."""
        rules = host.rules
        assert rules is not None
        if rules.refresh_at > now:
            return None
        rules.refresh_at = float("inf")
        host.in_flight += 1
        return Ticket(b"", host.origin, host.origin + "/robots.txt", 0, robots=True)

    def redirect(self, ticket: Ticket, target: str) -> bool:
        """robots.txt answered with a redirect to ``target``: fetch that next for the same
        host, if it is crawlable and inside the allowed domains (the ``exclude`` patterns
        select pages, and robots.txt is none). False when it is not (nothing changes)."""
        url = canonicalize(target)
        if url is None or not self._allowed(url):
            return False
        self.hops.append(Ticket(b"", ticket.origin, url, 0, ticket.hops + 1, robots=True))
        return True

    def landed(self, host: HostQueue) -> tuple[bool, Rules | None]:
        """A robots.txt fetch of ``host`` came back: (was it a refresh, the copy to fall
        back on if robots.txt turns out unreachable). The host waits for it no longer."""
        refresh = not host.robots_in_flight
        host.robots_in_flight = False
        self.waiting -= not refresh
        return refresh, host.rules if refresh else self.stale.pop(host.origin, None)

    def answer(
        self,
        host: HostQueue,
        status: int,
        body: bytes,
        now: float,
        hold_s: float,
        fallback: Rules | None,
    ) -> RobotsAnswer:
        """Record a robots.txt response (``status`` 0: none) in the cache and decide: new
        rules; or, robots.txt unreachable, the ``fallback`` copy while it is usable (fetched
        again later), else a retry later or, attempts used up, giving the host up.
        ``hold_s``: a 429/503's Retry-After, the least wait before the next fetch."""
        rules = self.cache.store(host.origin, status, body) if self.obey else None
        if rules is not None:
            host.robots_attempts = 0
            self.time_rules(rules, now)
            host.rules = rules
            return RobotsAnswer(rules, rules.crawl_delay_s, 0.0, False)
        host.robots_attempts += 1
        retry = max(self.retry_s * 2 ** (host.robots_attempts - 1), hold_s)
        if fallback is not None and fallback.usable_until > now:
            # RFC 9309 2.4: crawl on with the copy fetched earlier, fetch again later
            fallback.refresh_at = now + retry
            if host.rules is not fallback:
                age = self.cache.clock() - fallback.fetched_at
                log.warning("robots.txt of %s unreachable: using the copy fetched %.0f s ago",
                            host.origin, age)  # fmt: skip
            host.rules = fallback
            return RobotsAnswer(None, fallback.crawl_delay_s, hold_s, False)
        host.rules = None  # no usable copy: nothing is fetched until robots.txt answers
        if host.robots_attempts >= self.attempts:
            log.warning("robots.txt of %s unavailable: host retired", host.origin)
            return RobotsAnswer(None, None, 0.0, True)
        return RobotsAnswer(None, None, retry, False)

    def close(self) -> None:
        """Close the disk cache."""
        self.cache.close()
