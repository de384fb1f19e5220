"""frontier/status.py on its own: host queues built by hand, read back as the status sees them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontier_crawl.frontier.completion import Completion
from frontier_crawl.frontier.hosts import HostQueue, HostQueues, HostState
from frontier_crawl.frontier.robots import Rules
from frontier_crawl.frontier.status import Busiest, HeldHosts, host_signals, next_due
from frontier_crawl.frontier.store import QueueEntry
from tests.unit.test_frontier import make


def queued(origin: str, n: int = 1) -> HostQueue:
    host = HostQueue(origin)
    host.hot = [(b"k%d" % i, QueueEntry(f"{origin}/{i}", 0)) for i in range(n)]
    return host


def test_signals_count_each_state_and_name_the_held_hosts() -> None:
    queues = HostQueues(1)
    ready, delayed, held, retired = (queues.add(queued(f"http://{n}.test"))
                                     for n in ("ready", "delayed", "held", "retired"))  # fmt: skip
    for host in (ready, delayed, held, retired):
        host.next_at = {"http://ready.test": 0.0, "http://delayed.test": 3.0}.get(host.origin, 50.0)
        queues.settle(host, 1.0)
    holding = HeldHosts()
    holding.hold(held, "retry-after", 1.0)
    holding.hold(retired, "backoff", 1.0)
    queues.move(retired, HostState.RETIRED)
    holding.release(retired.origin)  # as Frontier._retire does
    sig = host_signals(queues, holding, robots_waiting=2, min_delay_s=1.0, now=1.0)
    assert (sig.ready, sig.waiting, sig.backoff, sig.retired, sig.blocked) == (1, 1, 1, 1, 0)
    assert sig.total == 3 and sig.robots == 2
    assert sig.worst == (("http://held.test", "retry-after", 49.0),)
    assert sig.next_due == ("http://delayed.test", "delay", 2.0)
    later = host_signals(queues, holding, robots_waiting=0, min_delay_s=1.0, now=50.0)
    assert (later.backoff, later.worst, len(holding)) == (0, (), 0)  # due again: pruned


def test_holds_prune_and_name_the_worst_without_a_scan() -> None:
    """The holds of 10^4 hosts: the worst five come from the heap's top, the due ones are
    pruned from the other heap's, and a replaced hold leaves only a stale entry behind."""
    queues = HostQueues(1)
    holding = HeldHosts()
    hosts = [queues.add(queued(f"http://h{i}.test")) for i in range(10_000)]
    for i, host in enumerate(hosts):
        host.next_at = 10.0 + (i * 7919 % 10_000)  # every time from 10 to 10,009 once
        queues.settle(host, 1.0)
        holding.hold(host, "backoff" if i % 2 else "retry-after", 1.0)
    hosts[0].next_at = 20_000.0  # held again, longer (its first hold's entry is stale)
    holding.hold(hosts[0], "backoff", 1.0)
    queues.settle(hosts[0], 1.0)
    sig = host_signals(queues, holding, robots_waiting=0, min_delay_s=1.0, now=5_000.0)
    assert sig.worst[0] == ("http://h0.test", "backoff", 15_000.0)
    assert [round(w) for _o, _r, w in sig.worst[1:]] == [5009, 5008, 5007, 5006]
    assert sig.backoff == len(holding) == 5010  # held until after 5,000 (h0 included)
    quiet = queues.add(queued("http://quiet.test"))
    quiet.next_at = 20_000.0
    for _ in range(3_000):  # holds at 9,000 with no status asked: each prunes two due ones
        holding.hold(quiet, "backoff", 9_000.0)
    assert len(holding) == 1_011  # h0, quiet and those held past 9,000


def test_next_due_says_why_the_first_host_waits() -> None:
    queues = HostQueues(1)
    host = queues.add(queued("http://a.test"))
    host.next_at, host.delay_s = 10.0, 1.0
    host.rules = Rules("frontier-crawl", b"User-agent: *\nCrawl-delay: 10\n")
    queues.settle(host, 0.0)
    assert next_due(queues, HeldHosts(), 1.0, 4.0) == ("http://a.test", "crawl-delay", 6.0)
    assert next_due(queues, HeldHosts(), 20.0, 4.0) == ("http://a.test", "delay", 6.0)
    holding = HeldHosts()
    holding.hold(host, "backoff", 0.0)
    assert next_due(queues, holding, 1.0, 4.0)[1] == "backoff"  # type: ignore[index]
    assert next_due(HostQueues(1), HeldHosts(), 1.0, 0.0) is None


def test_busiest_orders_by_requests_started() -> None:
    busiest = Busiest(kept=3)
    hosts = {name: queued(f"http://{name}.test", n) for name, n in (("a", 0), ("b", 2), ("c", 0),
                                                                   ("d", 3), ("e", 1))}  # fmt: skip
    for name in "abbbbbbbbbaaaaddeeeee":  # a 5, b 9, d 2, e 5; c none
        host = hosts[name]
        host.starts += 1
        busiest.started(host)
    assert busiest.top(10) == [("http://b.test", 9, 2), ("http://e.test", 5, 1),
                               ("http://a.test", 5, 0)]  # fmt: skip
    assert busiest.top(1) == [("http://b.test", 9, 2)]


@given(st.lists(st.integers(0, 40), max_size=400), st.integers(1, 8))
def test_busiest_keeps_the_exact_top(starts: list[int], kept: int) -> None:
    """Whatever the order of the starts, the kept hosts have the most starts (ties aside)."""
    busiest = Busiest(kept=kept)
    hosts = [HostQueue(f"http://h{i}.test") for i in range(41)]
    for i in starts:
        hosts[i].starts += 1
        busiest.started(hosts[i])
    expected = sorted((h.starts for h in hosts if h.starts), reverse=True)[:kept]
    assert [started for _o, started, _q in busiest.top(kept)] == expected


def _calls(fn: Callable[[], object]) -> int:
    """Python and C function calls made while ``fn`` runs."""
    calls = 0

    def profile(_frame: object, event: str, _arg: object) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.timeout(120)
def test_status_at_100_000_hosts_reads_no_host_table(tmp_path: Path) -> None:
    """Issue 29: the busiest hosts were found by a scan of every host, and the held ones by a
    scan of every held one, per status. A frontier of 10^5 hosts (10^4 of them held by a 429)
    answers both with a bounded number of calls, and right."""
    f, _ = make(tmp_path, allow_domains=["test"], min_delay_s=0.0, memory_urls=20_000,
                map_size=1 << 30)  # fmt: skip
    n = 100_000
    with f.batch():
        f.add([f"http://h{i}.test/" for i in range(n)], depth=0)
        f.add([f"http://big{j}.test/{k}" for j in range(12) for k in range(j + 2)], depth=0)
    now = 1_000.0
    while True:
        with f.batch():  # as the engine's commit group (refills read in the open transaction)
            tickets = f.next_ready(now, 5_000)
            for t in tickets:
                throttled = t.url.startswith("http://h") and int(t.url[8:].split(".")[0]) % 10 == 0
                answer = Completion(now, status=429, retry_after="120") if throttled else (
                    Completion(now, status=200))  # fmt: skip
                f.complete(t, answer)
        if not tickets:
            break
        now += 0.001
    assert f.view.stats()["hosts"] == n + 12
    signals = f.view.host_signals(now)
    assert signals.backoff == n // 10 and len(signals.worst) == 5
    assert all(reason == "retry-after" and held > 100 for _o, reason, held in signals.worst)
    top = f.view.busiest(10)
    assert [(origin, started) for origin, started, _q in top] == [
        (f"http://big{j}.test", j + 2) for j in range(11, 1, -1)
    ]
    calls = _calls(lambda: (f.view.busiest(10), f.view.host_signals(now)))
    assert calls < 2_000, f"{calls} calls: the status walks a host table"
    f.close()
