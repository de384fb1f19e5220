"""frontier/buffer.py on its own: the memory budget over a real LMDB queue (``QueueStore``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from frontier_crawl.frontier.buffer import QueueBuffer
from frontier_crawl.frontier.hosts import HostQueue
from frontier_crawl.frontier.store import QueueEntry, QueueStore
from frontier_crawl.frontier.txn import Transactions

A = "http://a.test"


class Parts:
    def __init__(self, tmp_path: Path, memory_urls: int) -> None:
        self.env = lmdb.open(str(tmp_path / "env"), map_size=1 << 26, max_dbs=16)
        store = self.store = QueueStore(self.env)
        self.tx = Transactions(self.env, tmp_path / "env", flush=store.flush,
                               aborted=store.aborted, committed=store.committed)  # fmt: skip
        self.buffer = QueueBuffer(store, self.tx, memory_urls)
        self.host = HostQueue(A)

    def put(self, *paths: str, priority: int = 0) -> None:
        with self.tx.write() as txn:
            for path in paths:
                self.buffer.put(txn, self.host, QueueEntry(A + path, 1, priority=priority))

    def drain(self, now: float = 0.0) -> list[str]:
        out = []
        with self.tx.batch():
            while (item := self.buffer.pop(self.host, now)) is not None:
                out.append(item[1].url.removeprefix(A))
                self.host.starts += 1
        return out


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    p = Parts(tmp_path, memory_urls=3)
    yield p
    p.env.close()


def test_past_the_budget_urls_stay_in_lmdb_and_come_back_in_order(parts: Parts) -> None:
    parts.put(*(f"/{i}" for i in range(7)))
    b = parts.buffer
    assert (b.queued, b.hot_total, b.spilled, parts.host.unloaded) == (7, 3, 4, 4)
    assert parts.drain() == [f"/{i}" for i in range(7)]
    assert b.refilled == 4 and b.hot_total == 0 and b.peak_hot == 3
    assert parts.host.hot is None and parts.host.unloaded == 0


def test_a_higher_priority_goes_ahead_of_what_is_in_memory(parts: Parts) -> None:
    parts.put("/1", "/2", "/3")
    parts.put("/urgent", priority=5)  # over the budget: /3 goes back to LMDB
    assert parts.buffer.hot_total == 3 and parts.host.unloaded == 1
    assert parts.drain() == ["/urgent", "/1", "/2", "/3"]


def test_a_retry_waits_for_its_time_and_for_another_start(parts: Parts) -> None:
    parts.put("/1", "/2", "/3")
    with parts.tx.batch():
        key, entry = parts.buffer.pop(parts.host, 0.0) or (b"", None)
        assert entry is not None
        parts.buffer.requeue(parts.host, key, QueueEntry(entry.url, 1, attempt=1), 5.0)
    assert parts.buffer.queued == 4 and parts.host.retries is not None
    assert parts.drain(4.0) == ["/2", "/3"]  # not due yet
    assert parts.drain(5.0) == ["/1"]


def test_drain_takes_out_every_url_of_a_host(parts: Parts) -> None:
    parts.put(*(f"/{i}" for i in range(5)))
    with parts.tx.batch():
        key, entry = parts.buffer.pop(parts.host, 0.0) or (b"", None)
        assert entry is not None
        parts.buffer.queued -= 1  # handed out (as Frontier._take counts it)
        parts.buffer.requeue(parts.host, key, entry, 99.0)
        urls = [e.url.removeprefix(A) for _k, e in parts.buffer.drain(parts.host)]
    assert sorted(urls) == [f"/{i}" for i in range(5)]
    assert (parts.buffer.queued, parts.buffer.hot_total) == (0, 0)
    assert parts.host.hot is None and parts.host.retries is None and parts.host.unloaded == 0
