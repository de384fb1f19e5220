"""frontier/revisits.py on its own: the schedule (``Recrawl``) in a real LMDB environment, the
host queues built by hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from frontier_crawl.frontier.hosts import HostQueue, HostQueues, HostState, Ticket
from frontier_crawl.frontier.recrawl import Bounds, Recrawl, RecrawlPolicy, Visit
from frontier_crawl.frontier.revisits import Revisits
from frontier_crawl.frontier.robots import Rules
from frontier_crawl.frontier.store import QueueStore
from frontier_crawl.frontier.txn import Transactions
from frontier_crawl.frontier.urls import url_digest

POLICY = RecrawlPolicy(default=Bounds(100.0, 10.0, 1000.0), unchanged_factor=1.5,
                       changed_factor=0.5, gone_visits=2)  # fmt: skip
A = "http://a.test"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Parts:
    def __init__(self, tmp_path: Path) -> None:
        self.env = lmdb.open(str(tmp_path / "env"), map_size=1 << 26, max_dbs=16)
        self.clock = Clock()
        self.queues = HostQueues(1)
        self.rejected: list[tuple[str, str]] = []
        self.recrawl = Recrawl(self.env, self.env.open_db(b"blobs"), POLICY, self.clock)
        store = QueueStore(self.env)
        self.tx = Transactions(self.env, tmp_path / "env", flush=self.recrawl.flush,
                               aborted=self.recrawl.aborted,
                               committed=self.recrawl.committed)  # fmt: skip
        self.revisits = Revisits(self.recrawl, self.queues, store, write=self.tx.write,
                                 read=self.tx.read, in_scope=lambda url: url.startswith(A),
                                 host_for=self.host_for, on_reject=self.reject,
                                 wall_clock=self.clock)  # fmt: skip

    def host_for(self, _txn: lmdb.Transaction[bytes], origin: str) -> HostQueue:
        host = self.queues.hosts.get(origin)
        return host if host is not None else self.queues.add(HostQueue(origin))

    def reject(self, ticket: Ticket, reason: str) -> None:
        self.rejected.append((ticket.url, reason))

    def schedule(self, *urls: str) -> None:
        """Each URL due ``interval_s`` (100 s) from now, as a revisit put back would be."""
        with self.tx.write() as txn:
            for url in urls:
                self.recrawl.put_back(txn, Visit(url, interval_s=100.0, date=1.0), url_digest(url))


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    p = Parts(tmp_path)
    yield p
    p.env.close()


def test_due_revisits_are_loaded_into_their_hosts_and_out_of_scope_ones_forgotten(
    parts: Parts,
) -> None:
    parts.schedule(A + "/1", A + "/2", "http://b.test/x")
    parts.revisits.pump(0.0)
    assert parts.queues.hosts == {}  # not due yet
    parts.clock.now += 200.0
    parts.revisits.pump(0.0)
    host = parts.queues.hosts[A]
    assert host.revisits is not None and len(host.revisits) == 2
    assert host.state is HostState.READY and "http://b.test" not in parts.queues.hosts
    with parts.env.begin() as txn:
        assert parts.recrawl.visit_of(txn, "http://b.test/x") is None  # forgotten
        assert parts.recrawl.visit_of(txn, A + "/1") is not None


def test_revisits_are_taken_under_robots_rules_and_retried_later(parts: Parts) -> None:
    parts.schedule(A + "/1", A + "/private")
    parts.clock.now += 200.0
    parts.revisits.pump(0.0)
    host = parts.queues.hosts[A]
    host.rules = Rules("frontier-crawl", b"User-agent: *\nDisallow: /private\n")
    revisits = host.revisits
    assert revisits is not None and parts.revisits.turn(host, revisits, 0.0)
    taken = [parts.revisits.take(host, revisits, 0.0, "robots-denied") for _ in range(2)]
    tickets = [t for t in taken if t is not None]
    assert [t.url for t in tickets] == [A + "/1"] and tickets[0].last is not None
    assert host.in_flight == 1 and parts.rejected == [(A + "/private", "robots-denied")]
    assert host.revisits is None  # the denied one went back to the schedule
    parts.revisits.retry(host, tickets[0], 7.0)
    assert host.revisits is not None and host.revisits.ready_at() == 7.0
    assert not parts.revisits.turn(host, host.revisits, 6.0)
    again = parts.revisits.take(host, host.revisits, 7.0, "robots-denied")
    assert again is not None and again.url == A + "/1" and again.attempt == 1


def test_a_sitemap_lastmod_makes_a_scheduled_url_due_now(parts: Parts) -> None:
    parts.schedule(A + "/1")
    pairs = [(A + "/1", parts.clock.now + 1.0), ("not a url", 0.0), (A + "/unscheduled", 9e9)]
    made = parts.revisits.sitemap_lastmod(pairs)
    assert made == 1
    wake = parts.revisits.next_wake()
    parts.revisits.pump(0.0)
    assert wake is not None and len(parts.queues.hosts[A].revisits or ()) == 1
