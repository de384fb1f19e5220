"""Warm hosts first (frontier/hosts.py): with far more ready hosts than fetch slots, a host in
the middle of a session comes back as soon as its politeness delay allows (its connection still
open), not after every other ready host; a session's cap keeps large hosts from keeping the
rest out. Real LMDB, a test clock, every ticket finished at once."""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from frontier_crawl.frontier import Frontier
from frontier_crawl.frontier.hosts import SESSION_REQUESTS
from frontier_crawl.frontier.urls import host_of
from tests.unit.test_frontier import make

pytestmark = pytest.mark.timeout(120)

TICK_S = 0.1  #: the simulated loop's tick


def crawl(f: Frontier, slots: int, until: float = 1e9) -> dict[str, list[tuple[float, str]]]:
    """Hand out up to ``slots`` tickets a tick, each finished at once; (time, URL) per host."""
    starts: dict[str, list[tuple[float, str]]] = defaultdict(list)
    now = 0.0
    while f.pending and now < until:
        with f.batch():
            for ticket in f.next_ready(now, slots):
                starts[host_of(ticket.origin)].append((now, ticket.url))
                f.finish(ticket, now)
        now = round(now + TICK_S, 6)
    return starts


def test_a_host_comes_back_after_its_delay_not_after_every_other_host(tmp_path: Path) -> None:
    """2,000 hosts of 3 URLs, 20 slots a tick (200 requests/s), 1 s between a host's starts:
    one pass over the ready hosts takes 10 s, but a host's next request follows its delay."""
    f, _ = make(tmp_path, min_delay_s=1.0, memory_urls=100_000)
    hosts = [f"http://h{i}.a.test" for i in range(2000)]
    with f.batch():
        for page in range(3):
            f.add([f"{h}/{page}" for h in hosts], depth=0)
    starts = crawl(f, slots=20)
    assert sum(len(s) for s in starts.values()) == 6000
    assert all(len({u for _, u in s}) == 3 for s in starts.values())  # each URL once
    gaps = [b[0] - a[0] for s in starts.values() for a, b in itertools.pairwise(s)]
    assert min(gaps) >= 1.0 - 1e-9  # politeness as before
    assert statistics.median(gaps) <= 1.0 + 2 * TICK_S, statistics.median(gaps)
    f.close()


def test_a_session_ends_so_large_hosts_do_not_keep_new_ones_out(tmp_path: Path) -> None:
    """50 hosts of 1,000 URLs want 50 requests/s, twice the 20/s the slots give; a host of
    one URL queued after them still starts once the large hosts' sessions have run out."""
    f, _ = make(tmp_path, min_delay_s=1.0, memory_urls=100_000)
    large = [f"http://big{i}.a.test" for i in range(50)]
    with f.batch():
        f.add([f"{h}/{page}" for page in range(1000) for h in large], depth=0)
        f.add(["http://small.a.test/"], depth=0)
    rate = 2 / TICK_S
    bound = len(large) * SESSION_REQUESTS / rate * 1.5
    starts = crawl(f, slots=2, until=bound)
    assert "small.a.test" in starts, f"not started within {bound:.0f} s"
    assert all(len(starts[host_of(h)]) < 1000 for h in large)  # (long before the large end)
    f.close()
