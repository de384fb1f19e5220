"""frontier/dispatch.py on its own: request starts and ends over host queues built by hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_crawl.frontier.completion import Failure
from frontier_crawl.frontier.dispatch import Dispatch
from frontier_crawl.frontier.hosts import HostQueue, HostQueues, HostState, Ticket
from frontier_crawl.frontier.politeness import DelayPolicy, delay_for
from frontier_crawl.frontier.robots import RobotsCache
from frontier_crawl.frontier.robotsgate import ALLOW_ALL, RobotsGate, Rules
from frontier_crawl.frontier.spacing import Spacing
from frontier_crawl.frontier.store import QueueEntry

POLICY = DelayPolicy(min_delay_s=2.0, max_delay_s=30.0, backoff_s=5.0, max_backoff_s=60.0)


class Parts:
    def __init__(self, tmp_path: Path, connections: int = 1, per_ip: bool = False) -> None:
        self.queues = HostQueues(connections)
        self.gate = RobotsGate(RobotsCache(tmp_path / "robots", "frontier-crawl", 100.0),
                               lambda _name: True, obey=True, ttl_s=100.0, stale_s=0.0,
                               retry_s=10.0, attempts=3)  # fmt: skip
        self.dispatch = Dispatch(self.queues, Spacing(POLICY, 3, self.queues), self.gate,
                                 per_ip=per_ip, known_ips={"a.test": "10.0.0.1",
                                                           "b.test": "10.0.0.1"})  # fmt: skip

    def host(self, origin: str, n: int = 3) -> HostQueue:
        host = self.queues.add(HostQueue(origin))
        self.dispatch.join(host)
        host.rules = ALLOW_ALL
        host.hot = [(b"%d" % i, QueueEntry(f"{origin}/{i}", 0)) for i in range(n)]
        self.queues.settle(host, 0.0)
        return host

    @staticmethod
    def take(host: HostQueue, _now: float) -> Ticket | None:
        if not host.hot:
            return None
        key, entry = host.hot.pop(0)
        host.in_flight += 1
        return Ticket(key, host.origin, entry.url, 0)


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    p = Parts(tmp_path)
    yield p
    p.gate.close()


def test_each_start_spaces_the_host_and_redirect_hops_go_first(parts: Parts) -> None:
    a, b = parts.host("http://a.test"), parts.host("http://b.test")
    hop = Ticket(b"", a.origin, "http://a.test/robots2.txt", 0, 1, robots=True)
    parts.gate.hops.append(hop)
    out = parts.dispatch.hand_out(10.0, 10, parts.take)
    assert [t.url for t in out] == [hop.url, "http://a.test/0", "http://b.test/0"]
    assert parts.dispatch.in_flight == 2  # the hop was counted when its chain began
    assert a.next_at == b.next_at == 12.0 and a.starts == 1
    assert a.state is HostState.BUSY  # its one connection is in use
    assert parts.dispatch.hand_out(11.0, 10, parts.take) == []


def test_a_release_waits_the_delay_from_the_end_and_records_holds(parts: Parts) -> None:
    a = parts.host("http://a.test")
    (t,) = parts.dispatch.hand_out(10.0, 1, parts.take)
    assert parts.dispatch.release(a, t, 13.0, 2.0, 0.0, 0.0, "") == 0.0
    assert a.next_at == 15.0 and a.state is HostState.SNOOZED and parts.dispatch.in_flight == 0
    (t,) = parts.dispatch.hand_out(15.0, 1, parts.take)
    assert parts.dispatch.release(a, t, 16.0, 2.0, 5.0, 0.0, "") == 3.0  # backoff: 21 vs 18
    assert len(parts.dispatch.holding) == 1
    assert parts.dispatch.holding.reason(a.origin) == "backoff"
    (t,) = parts.dispatch.hand_out(21.0, 1, parts.take)
    assert parts.dispatch.release(a, t, 21.0, 2.0, 0.0, 30.0, "") == 28.0
    assert parts.dispatch.holding.reason(a.origin) == "retry-after"


def test_hosts_of_one_address_share_its_connections(tmp_path: Path) -> None:
    parts = Parts(tmp_path, per_ip=True)
    a, b = parts.host("http://a.test"), parts.host("http://b.test")
    assert a.group is b.group is not None
    (t,) = parts.dispatch.hand_out(10.0, 10, parts.take)  # b waits: the address is busy
    assert t.origin == a.origin and b.state is HostState.BUSY
    assert parts.dispatch.hand_out(10.0, 10, parts.take) == []
    parts.dispatch.release(a, t, 11.0, 2.0, 0.0, 0.0, "10.0.0.1")
    assert b.state is HostState.READY  # out of the group's waiting list
    assert parts.dispatch.hand_out(11.0, 10, parts.take) == []  # the address is not due
    assert b.state is HostState.SNOOZED and b.wake_at == 13.0  # the group's next start
    (t2,) = parts.dispatch.hand_out(13.0, 10, parts.take)
    assert t2.origin in (a.origin, b.origin)
    parts.gate.close()


_POLICIES = st.builds(
    DelayPolicy,
    min_delay_s=st.sampled_from([0.0, 0.5, 2.0]),
    max_delay_s=st.sampled_from([0.0, 1.0, 30.0]),
    delay_factor=st.sampled_from([0.0, 0.0, 2.0]),
    max_crawl_delay_s=st.sampled_from([0.0, 3.0]),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # the policy in force (a reload replaces it)
            st.sampled_from([None, 0.0, 1.5, 10.0]),  # the host's Crawl-delay
            st.floats(allow_nan=True, allow_infinity=True),  # fetch time
            st.sampled_from([0.0, 1.0, 50.0]),  # the host's last delay
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(_POLICIES, min_size=3, max_size=3),
)
def test_spacing_answers_as_delay_for(
    steps: list[tuple[int, float | None, float, float]], policies: list[DelayPolicy]
) -> None:
    """start_gap and after give what delay_for gives, through reloads of the policy (the
    delay of a host without a Crawl-delay is remembered per policy)."""
    queues = HostQueues(1)
    spacing = Spacing(policies[0], 3, queues)
    host = HostQueue("http://a.test")
    ticket = Ticket(b"k", host.origin, "http://a.test/", 0)
    for which, crawl_delay, fetch_s, delay_s in steps:
        p = spacing.policy = policies[which]
        delay_line = b"" if crawl_delay is None else b"Crawl-delay: %r\n" % crawl_delay
        host.rules = Rules("t", b"User-agent: *\n" + delay_line)
        assert host.rules.crawl_delay_s == crawl_delay
        host.delay_s = delay_s
        assert spacing.start_gap(host) == max(delay_s, delay_for(0.0, crawl_delay, p))
        assert spacing.after(host, ticket, fetch_s, Failure.NONE) == (
            delay_for(fetch_s, crawl_delay, p),
            0.0,
        )
