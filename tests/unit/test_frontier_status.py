"""frontier/status.py on its own: host queues built by hand, read back as the status sees them."""

from __future__ import annotations

from collections import deque

from frontier_crawl.frontier.hosts import HostQueue, HostQueues, HostState
from frontier_crawl.frontier.robots import Rules
from frontier_crawl.frontier.status import Holding, busiest, host_signals, next_due
from frontier_crawl.frontier.store import QueueEntry


def queued(origin: str, n: int = 1) -> HostQueue:
    host = HostQueue(origin)
    host.hot = deque((b"k%d" % i, QueueEntry(f"{origin}/{i}", 0)) for i in range(n))
    return host


def test_signals_count_each_state_and_name_the_held_hosts() -> None:
    queues = HostQueues(1)
    ready, delayed, held, retired = (queues.add(queued(f"http://{n}.test"))
                                     for n in ("ready", "delayed", "held", "retired"))  # fmt: skip
    for host in (ready, delayed, held, retired):
        host.next_at = {"http://ready.test": 0.0, "http://delayed.test": 3.0}.get(host.origin, 50.0)
        queues.settle(host, 1.0)
    queues.move(retired, HostState.RETIRED)
    holding: Holding = {held.origin: (held, "retry-after"), retired.origin: (retired, "backoff")}
    sig = host_signals(queues, holding, robots_waiting=2, min_delay_s=1.0, now=1.0)
    assert (sig.ready, sig.waiting, sig.backoff, sig.retired, sig.blocked) == (1, 1, 1, 1, 0)
    assert sig.total == 3 and sig.robots == 2
    assert sig.worst == (("http://held.test", "retry-after", 49.0),)
    assert sig.next_due == ("http://delayed.test", "delay", 2.0)
    assert list(holding) == [held.origin]  # the retired host's entry is pruned


def test_next_due_says_why_the_first_host_waits() -> None:
    queues = HostQueues(1)
    host = queues.add(queued("http://a.test"))
    host.next_at, host.delay_s = 10.0, 1.0
    host.rules = Rules("frontier-crawl", b"User-agent: *\nCrawl-delay: 10\n")
    queues.settle(host, 0.0)
    assert next_due(queues, {}, 1.0, 4.0) == ("http://a.test", "crawl-delay", 6.0)
    assert next_due(queues, {}, 20.0, 4.0) == ("http://a.test", "delay", 6.0)
    assert next_due(queues, {host.origin: (host, "backoff")}, 1.0, 4.0)[1] == "backoff"  # type: ignore[index]
    assert next_due(HostQueues(1), {}, 1.0, 0.0) is None


def test_busiest_orders_by_requests_started_and_skips_idle_hosts() -> None:
    queues = HostQueues(1)
    for name, starts, n in (("a", 5, 0), ("b", 9, 2), ("c", 0, 0), ("d", 0, 3)):
        host = queues.add(
            queued(f"http://{name}.test", n) if n else HostQueue(f"http://{name}.test")
        )
        host.starts = starts
    assert busiest(queues, 10) == [("http://b.test", 9, 2), ("http://a.test", 5, 0),
                                   ("http://d.test", 0, 3)]  # fmt: skip
    assert busiest(queues, 1) == [("http://b.test", 9, 2)]
