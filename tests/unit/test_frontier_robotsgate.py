"""frontier/robotsgate.py on its own: a host's robots.txt states over a real disk cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.frontier.hosts import HostQueue, Ticket
from frontier_crawl.frontier.robots import RobotsCache
from frontier_crawl.frontier.robotsgate import ALLOW_ALL, RobotsGate
from frontier_crawl.frontier.urls import host_of

ORIGIN = "http://a.test"
BODY = b"User-agent: *\nDisallow: /private\nCrawl-delay: 2\n"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def gate(tmp_path: Path, clock: Clock) -> Iterator[RobotsGate]:
    cache = RobotsCache(tmp_path / "robots", "frontier-crawl", 100.0, 50.0, clock)
    gate = RobotsGate(cache, lambda url: host_of(url).endswith("a.test"), obey=True, ttl_s=100.0,
                      stale_s=50.0, retry_s=10.0, attempts=3)  # fmt: skip
    yield gate
    gate.close()


def test_a_host_waits_for_its_first_robots_txt_then_goes_on_with_its_rules(
    gate: RobotsGate,
) -> None:
    host = HostQueue(ORIGIN)
    assert gate.known_rules(host, 0.0) is None  # nothing cached: fetch it first
    ticket = gate.first_fetch(host)
    assert ticket.robots and ticket.url == ORIGIN + "/robots.txt"
    assert host.robots_in_flight and gate.waiting == 1
    refresh, fallback = gate.landed(host)
    assert (refresh, fallback, gate.waiting, host.robots_in_flight) == (False, None, 0, False)
    answer = gate.answer(host, 200, BODY, 5.0, 0.0, fallback)
    assert answer.rules is host.rules and answer.crawl_delay_s == 2.0 and not answer.give_up
    assert not host.rules.allowed(ORIGIN + "/private/x")
    assert host.rules.refresh_at == 105.0 and host.rules.usable_until == 155.0
    assert gate.refresh(host, 104.0) is None
    again = gate.refresh(host, 105.0)  # due: one slot fetches it again, the rules stand
    assert again is not None and host.in_flight == 1 and host.rules.refresh_at == float("inf")


def test_cached_rules_are_used_fresh_and_kept_as_a_fallback_when_stale(
    gate: RobotsGate, clock: Clock
) -> None:
    host = HostQueue(ORIGIN)
    gate.cache.store(ORIGIN, 200, BODY)
    clock.now += 30.0
    rules = gate.known_rules(host, 500.0)
    assert rules is not None and rules.crawl_delay_s == 2.0 and rules.refresh_at == 570.0
    clock.now += 100.0  # 130 s old: past the TTL, still usable for 20 s
    assert gate.known_rules(host, 500.0) is None and ORIGIN in gate.stale
    gate.first_fetch(host)
    refresh, fallback = gate.landed(host)
    assert not refresh  # the first fetch, not a refresh
    assert fallback is not None and ORIGIN not in gate.stale
    answer = gate.answer(host, 503, b"", 500.0, 0.0, fallback)  # unreachable: the copy stands
    assert host.rules is fallback and answer.crawl_delay_s == 2.0 and answer.retry_s == 0.0
    assert fallback.refresh_at == 510.0  # fetched again after robots_retry_s


def test_unreachable_robots_txt_is_retried_with_a_growing_delay_then_given_up(
    gate: RobotsGate,
) -> None:
    host = HostQueue(ORIGIN)
    answers = [gate.answer(host, status, b"", 0.0, 15.0, None) for status in (503, 0, 429)]
    assert [(a.retry_s, a.give_up) for a in answers] == [(15.0, False), (20.0, False),
                                                         (0.0, True)]  # fmt: skip
    assert host.rules is None


def test_a_robots_txt_not_obeyed_allows_all_and_is_never_fetched(gate: RobotsGate) -> None:
    gate.obey = False
    host = HostQueue(ORIGIN)
    assert gate.known_rules(host, 0.0) is ALLOW_ALL
    assert gate.answer(host, 200, BODY, 0.0, 0.0, None).rules is None


def test_redirects_stay_inside_the_allowed_domains(gate: RobotsGate) -> None:
    ticket = Ticket(b"", ORIGIN, ORIGIN + "/robots.txt", 0, hops=1, robots=True)
    assert gate.redirect(ticket, "https://www.a.test/robots.txt")
    assert not gate.redirect(ticket, "https://elsewhere.test/robots.txt")
    assert not gate.redirect(ticket, "ftp://a.test/robots.txt")
    (hop,) = gate.hops
    assert (hop.origin, hop.url, hop.hops, hop.robots) == (ORIGIN, "https://www.a.test/robots.txt",
                                                           2, True)  # fmt: skip
