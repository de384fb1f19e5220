"""What a waiting host costs (issue 29: at 10^6 hosts the crawl's cost is per new host): its
bytes of memory in a real frontier, robots.txt parsed once per body and shared between hosts,
the robots.txt cache's writes batched (and read back before and after they are written)."""

from __future__ import annotations

import contextlib
import gc
import tracemalloc
from pathlib import Path

import lmdb
import pytest

from frontier_crawl.frontier import Frontier
from frontier_crawl.frontier.buffer import QueueBuffer
from frontier_crawl.frontier.hosts import HostQueue
from frontier_crawl.frontier.robots import PENDING_WRITES, ParsedBodies, RobotsCache, Rules
from frontier_crawl.frontier.store import QueueEntry, QueueStore
from frontier_crawl.frontier.txn import Transactions
from frontier_crawl.safefs import open_cache
from tests.unit.test_frontier import make

BODY = b"User-agent: *\nDisallow: /private/\n"
#: Python bytes per waiting host (tracemalloc) that a frontier may take at HOSTS hosts: between
#: main before branch h29host (a deque and a parsed robots.txt per host) and the branch, with
#: a margin either side (the figures: bench/README.md, "Issue 29, branch h29host")
BOUND = 2_100
HOSTS = 10_000


def waiting_hosts(tmp_path: Path, hosts: int) -> tuple[Frontier, float]:
    """A frontier with ``hosts`` hosts, one URL queued on each (half of them held in memory,
    the rest in LMDB), robots.txt answered for every one (the same body): each host waits for
    its politeness delay with its rules known. Returns it and the bytes per host it took."""
    f, _ = make(tmp_path, allow_domains=["test"], obey_robots=True, memory_urls=hosts // 2,
                map_size=1 << 30)  # fmt: skip
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for lo in range(0, hosts, 5_000):
            f.add([f"http://h{i}.test/p" for i in range(lo, min(hosts, lo + 5_000))], depth=0)
        tickets = f.next_ready(0.0, hosts)
        assert len(tickets) == hosts and all(t.robots for t in tickets)
        for ticket in tickets:
            f.robots_done(ticket, 0.5, 200, BODY, 0.01)
        del tickets, ticket
        gc.collect()
        per_host = (tracemalloc.get_traced_memory()[0] - before) / hosts
    finally:
        tracemalloc.stop()
    return f, per_host


@pytest.mark.timeout(300)
def test_a_waiting_host_costs_under_the_bound(tmp_path: Path) -> None:
    f, per_host = waiting_hosts(tmp_path, HOSTS)
    try:
        hosts = list(f._hosts.values())
        assert len(hosts) == HOSTS
        assert all(h.rules is not None and h.queued == 1 for h in hosts)  # all waiting
        assert f.view.spilled > 0 and f.view.hot_total > 0  # some in memory, some in LMDB
        assert per_host < BOUND, f"{per_host:.0f} bytes per waiting host"
        # one parse for every host, and each host its own times
        bodies = f._files.robots.bodies
        assert (bodies.parses, bodies.hits) == (1, HOSTS - 1)
        assert all(h.rules is not None and h.rules.allowed(h.origin + "/p") for h in hosts)
        first = hosts[0].rules
        assert first is not None and not first.allowed(hosts[0].origin + "/private/x")
    finally:
        f.close()


def test_hosts_with_the_same_body_share_one_parse(tmp_path: Path) -> None:
    cache = RobotsCache(tmp_path / "robots", "fc-eval", ttl_s=3600.0)
    try:
        other = BODY + b"Crawl-delay: 5\n"
        rules = [cache.store(f"http://h{i}.test", 200, BODY if i % 10 else other)
                 for i in range(100)]  # fmt: skip
        assert (cache.bodies.parses, cache.bodies.hits) == (2, 98)
        assert all(r is not None and not r.allowed("http://x/private/1") for r in rules)
        assert {r.crawl_delay_s for r in rules if r is not None} == {None, 5.0}
        a, b = rules[1], rules[2]
        assert a is not None and b is not None and a is not b
        a.refresh_at, a.usable_until = 10.0, 20.0  # the host's own times, not the body's
        assert (b.refresh_at, b.usable_until) == (float("inf"), float("inf"))
        # a cache read (another run's host) shares the parsed body too
        hit = cache.get("http://h1.test")
        assert hit is not None and hit[0].crawl_delay_s is None
        assert cache.bodies.parses == 2
        # "unavailable" (a 404) and not obeyed: allow all, nothing parsed
        none = cache.store("http://h404.test", 404, b"not found")
        assert none is not None and none.allow_all and none.allowed("http://h404.test/private/")
        assert Rules("fc-eval", None).allow_all and cache.bodies.parses == 2
    finally:
        cache.close()


def test_parsed_bodies_stay_bounded() -> None:
    bodies = ParsedBodies("fc-eval", entries=8, body_bytes=1_000)
    for i in range(100):
        bodies.parsed(b"User-agent: *\nDisallow: /%d\n" % i)
    assert len(bodies) == 8 and bodies.parses == 100
    big = b"User-agent: *\nDisallow: /x\n" + b"#" * 2_000
    bodies.parsed(big)  # over body_bytes alone: kept, every other one dropped
    assert len(bodies) == 1
    bodies.parsed(big)
    assert bodies.hits == 1


def test_cache_writes_are_batched_and_read_before_they_are_written(tmp_path: Path) -> None:
    directory = tmp_path / "robots"
    cache = RobotsCache(directory, "fc-eval", ttl_s=3600.0)
    disk = open_cache(directory)  # the same files, read beside it
    try:
        for i in range(PENDING_WRITES - 1):
            cache.store(f"http://h{i}.test", 200 if i % 2 else 404, BODY)
        assert len(disk) == 0  # nothing written yet: one transaction per batch
        hit = cache.get("http://h1.test")  # a pending write is seen
        assert hit is not None and not hit[0].allow_all
        assert not hit[0].allowed("http://h1.test/private/")
        assert cache.get("http://h0.test") is not None  # a pending "allow all" too
        cache.store("http://last.test", 200, BODY)  # the batch is full: written
        assert len(disk) == PENDING_WRITES
        cache.store("http://h1.test", 404, b"")  # a newer answer, pending again
        hit = cache.get("http://h1.test")
        assert hit is not None and hit[0].allow_all
        cache.store("http://late.test", 200, BODY)
    finally:
        cache.close()  # writes the pending entries
        disk.close()
    again = RobotsCache(directory, "fc-eval", ttl_s=3600.0)
    try:
        late, h1 = again.get("http://late.test"), again.get("http://h1.test")
        assert late is not None and not late[0].allowed("http://late.test/private/")
        assert h1 is not None and h1[0].allow_all
        assert all(again.get(f"http://h{i}.test") is not None for i in range(PENDING_WRITES - 1))
    finally:
        again.close()


def test_a_checkpoint_writes_the_pending_robots_entries(tmp_path: Path) -> None:
    f, _ = make(tmp_path, obey_robots=True)
    try:
        f.add(["http://a.test/1", "http://b.test/1"], depth=0)
        for ticket in f.next_ready(0.0, 5):
            f.robots_done(ticket, 0.0, 200, BODY)
        disk = open_cache(tmp_path / "state" / "robots")
        try:
            assert len(disk) == 0
            f.checkpoint()
            assert sorted(disk) == ["http://a.test", "http://b.test"]
        finally:
            disk.close()
    finally:
        f.close()


def test_a_long_list_in_memory_is_cut_down_as_it_is_taken(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path / "env"), map_size=1 << 26, max_dbs=16)
    try:
        store = QueueStore(env)
        tx = Transactions(env, tmp_path / "env", flush=store.flush, aborted=store.aborted,
                          committed=store.committed)  # fmt: skip
        buffer = QueueBuffer(store, tx, 1_000)
        host = HostQueue("http://a.test")
        with tx.write() as txn:
            for i in range(100):
                buffer.put(txn, host, QueueEntry(f"http://a.test/{i:03}", 1))
        taken = []
        with tx.batch():
            while (item := buffer.pop(host, 0.0)) is not None:
                taken.append(item[1].url)
                left = 100 - len(taken)
                assert host.queued == left and buffer.hot_total == left
                if host.hot is not None:  # never more than twice what is left held
                    assert len(host.hot) <= 2 * left and host.head < len(host.hot)
        assert taken == [f"http://a.test/{i:03}" for i in range(100)]
        assert host.hot is None and host.head == 0
    finally:
        env.close()


def test_a_batch_that_finds_the_disk_full_is_dropped_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On a full (real, tmpfs) disk a batch's transaction fails: the crawl goes on with the
    rules it has, the entries are lost (only a cache) and the trouble is said once."""
    from tests.e2e.test_disk_full import MIB, Tmpfs

    fs = Tmpfs(tmp_path / "fs", 2 * MIB)
    try:
        cache = RobotsCache(fs.path / "robots", "fc-eval", ttl_s=3600.0)
        try:
            with (fs.path / "filler").open("wb", buffering=0) as fh, contextlib.suppress(OSError):
                while True:
                    fh.write(b"x" * 4096)
            body = BODY + b"# " + b"x" * 16_000 + b"\n"
            for batch in range(2):
                for i in range(PENDING_WRITES):
                    rules = cache.store(f"http://h{batch}-{i}.test", 200, body + b"%d" % i)
                    assert rules is not None and not rules.allowed("http://h.test/private/")
            warned = [r for r in caplog.records if "robots.txt cache not written" in r.message]
            assert len(warned) == 1
            assert cache.get("http://h0-1.test") is None  # dropped with its batch
        finally:
            cache.close()
    finally:
        fs.unmount()
