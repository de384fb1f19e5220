"""A spider request's priority orders its host's queue (real LMDB, a test clock): higher first,
FIFO among equal priorities, for URLs in memory and spilled to LMDB alike, through a higher
priority arriving while lower ones are loaded, a close and reopen, kill -9, an aborted
transaction; due retries still go first."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import pytest

from frontier_crawl.frontier import Frontier, Ticket
from frontier_crawl.frontier.options import FrontierOptions
from frontier_crawl.frontier.politeness import DelayPolicy
from frontier_crawl.frontier.store import PRIORITY_MAX
from frontier_crawl.frontier.traps import Limits

A = "http://a.test"
B = "http://b.test"
ROOT = Path(__file__).resolve().parents[2]


def options(memory_urls: int) -> FrontierOptions:
    return FrontierOptions(
        allow_domains=["a.test", "b.test"], exclude=[], limits=Limits(max_depth=5),
        max_pages=0, policy=DelayPolicy(min_delay_s=0.0, max_delay_s=30.0, delay_factor=0.0,
                                        max_crawl_delay_s=0.0, backoff_s=0.0),
        max_host_errors=3, connections_per_host=1, obey_robots=False, user_agent="testbot",
        robots_ttl_s=3600.0, robots_retry_s=10.0, robots_attempts=2, memory_urls=memory_urls,
        map_size=1 << 26,
    )  # fmt: skip


def make(tmp_path: Path, memory_urls: int = 1000) -> Frontier:
    return Frontier(tmp_path / "state", options(memory_urls))


@dataclass
class Model:
    """The order the frontier must follow: per host, highest (clamped) priority first, then
    admission order."""

    queued: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)
    taken: dict[str, tuple[int, int, str]] = field(default_factory=dict)
    seq: int = 0

    def add(self, url: str, priority: int) -> None:
        self.seq += 1
        clamped = max(-PRIORITY_MAX, min(PRIORITY_MAX, priority))
        self.queued.setdefault(url[: url.index("/", 8)], []).append((-clamped, self.seq, url))

    def take(self, url: str) -> None:
        """``url`` came out: it must be its host's first."""
        host = self.queued[url[: url.index("/", 8)]]
        first = min(host)
        assert url == first[2], f"{url} came out before {first[2]} (queued: {sorted(host)[:5]})"
        host.remove(first)
        self.taken[url] = first

    def put_back(self, url: str) -> None:
        """``url`` was in flight at a close: it is queued again in its place (its key)."""
        self.queued[url[: url.index("/", 8)]].append(self.taken.pop(url))

    def order(self, origin: str) -> list[str]:
        return [u for _, _, u in sorted(self.queued.get(origin, []))]


def add(f: Frontier, model: Model | None, url: str, priority: int) -> None:
    assert f.add([url], depth=1, referrer=f"{A}/", priority=priority) == 1
    if model is not None:
        model.add(url, priority)


def drain(f: Frontier, now: float = 1.0, model: Model | None = None) -> list[str]:
    """Every URL the frontier hands out from now on, finishing each; the hosts take turns."""
    out: list[str] = []
    while f.pending:
        tickets = f.next_ready(now, 10)
        assert tickets or f.pending == 0, "URLs queued but none handed out"
        for t in tickets:
            out.append(t.url)
            if model is not None:
                model.take(t.url)
            f.finish(t, now)
        now += 0.001
    return out


def test_higher_priority_first_and_fifo_among_equals_in_memory(tmp_path: Path) -> None:
    f = make(tmp_path)
    prios = [0, 5, -3, 5, 0, 1, -3, 2, 0, 5]
    model = Model()
    with f.batch():
        for i, p in enumerate(prios):
            add(f, model, f"{A}/u{i}", p)
    assert f.view.spilled == 0
    expected = model.order(A)
    assert expected[:4] == [f"{A}/u1", f"{A}/u3", f"{A}/u9", f"{A}/u7"]
    assert drain(f) == expected
    f.close()


def test_a_higher_priority_goes_ahead_of_loaded_and_spilled_urls_within_the_budget(
    tmp_path: Path,
) -> None:
    f = make(tmp_path, memory_urls=3)
    model = Model()
    for i in range(6):  # 3 in memory, 3 in LMDB
        add(f, model, f"{A}/n{i}", 0)
    assert f.view.hot_total == 3 and f.view.spilled == 3
    add(f, model, f"{A}/high", 7)  # sorts before what is loaded: held, the last one goes back
    assert f.view.hot_total == 3 and f.view.spilled == 4
    add(f, model, f"{A}/low", -1)  # after everything: LMDB only
    (t,) = f.next_ready(1.0, 5)
    assert t.url == f"{A}/high"  # handed out, in flight
    model.take(t.url)
    add(f, model, f"{A}/mid", 3)  # ahead of the loaded n0..n1, behind nothing in flight
    add(f, model, f"{A}/top", PRIORITY_MAX + 10)  # clamped
    assert f.view.hot_total <= 3
    f.finish(t, 1.0)
    assert drain(f, 2.0, model) == [f"{A}/top", f"{A}/mid"] + [f"{A}/n{i}" for i in range(6)] + [
        f"{A}/low"
    ]
    f.close()


@pytest.mark.parametrize("seed", range(12))
def test_random_priorities_and_pops_follow_the_order_in_memory_and_spilled(
    tmp_path: Path, seed: int
) -> None:
    """Batches of URLs of random priorities (some beyond the clamp) on two hosts, interleaved
    with URLs handed out (some left in flight for a while, some retried later), with a memory
    budget much smaller than the queue: every URL handed out is its host's first by the
    model, and the budget holds."""
    rnd = Random(seed)
    memory = rnd.choice((2, 5, 20, 1000))
    f = make(tmp_path, memory_urls=memory)
    model = Model()
    n = 0
    now = 1.0
    in_flight: list[Ticket] = []
    for _ in range(25):
        with f.batch():
            for _ in range(rnd.randint(0, 12)):
                host = rnd.choice((A, B))
                p = rnd.choice((0, 0, 0, 1, 2, -1, -5, 9, 70_000, -70_000, PRIORITY_MAX))
                add(f, model, f"{host}/r{n}", p)
                n += 1
            for t in f.next_ready(now, rnd.randint(0, 2)):
                model.take(t.url)
                in_flight.append(t)
            while in_flight and rnd.random() < 0.7:
                f.finish(in_flight.pop(0), now)
        assert f.view.hot_total <= memory + 2  # the budget (a refill takes one even when full)
        for origin in (A, B):  # memory holds a sorted prefix of the host's queue
            host = f._hosts.get(origin)
            if host is not None and host.hot:
                keys = [k for k, _ in host.hot[host.head :]]
                assert keys == sorted(keys) and host.loaded_upto is not None
                assert keys[-1] <= host.loaded_upto
        now += 0.001
    for t in in_flight:
        f.finish(t, now)
    drain(f, now + 1.0, model)
    assert not any(model.queued.values()) and f.pending == 0
    f.close()


def test_the_order_survives_close_and_reopen(tmp_path: Path) -> None:
    f = make(tmp_path, memory_urls=4)
    model = Model()
    rnd = Random(7)
    for i in range(40):
        add(f, model, f"{(A, B)[i % 2]}/c{i}", rnd.choice((-2, 0, 0, 3, 8)))
    (first, second) = f.next_ready(1.0, 5)
    model.take(first.url)
    model.take(second.url)
    f.finish(first, 1.0)  # done; ``second`` is in flight at the close: fetched again
    f.close()
    model.put_back(second.url)
    f = make(tmp_path, memory_urls=4)
    assert f.pending == 39
    drain(f, 2.0, model)
    assert not any(model.queued.values())
    f.close()


CHILD = """
import os, signal, sys
sys.path.insert(0, {root!r})
from tests.unit.test_frontier_priority import make
from pathlib import Path
f = make(Path({tmp!r}), memory_urls=3)
with f.batch():
    for i, p in enumerate({prios!r}):
        f.add([f"http://a.test/k{{i}}"], depth=1, priority=p)
t = f.next_ready(1.0, 1)[0]
assert t.url == "http://a.test/k{top}", t.url
with f.batch():
    f.finish(t, 1.0)
    f.add(["http://a.test/late-high"], depth=1, priority=50)
    f.add(["http://a.test/late-zero"], depth=1)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.timeout(60)
def test_the_order_survives_kill_9(tmp_path: Path) -> None:
    prios = [0, 2, 0, -1, 9, 2, 0, 40]
    top = prios.index(max(prios))
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD).format(root=str(ROOT), tmp=str(tmp_path),
                                                            prios=prios, top=top)],
        capture_output=True, text=True, timeout=50, cwd=ROOT,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    model = Model()
    for i, p in enumerate(prios):
        if i != top:
            model.add(f"{A}/k{i}", p)
    model.add(f"{A}/late-high", 50)
    model.add(f"{A}/late-zero", 0)
    f = make(tmp_path, memory_urls=3)
    assert drain(f, 2.0, model)[:2] == [f"{A}/late-high", f"{A}/k4"]
    assert not any(model.queued.values())
    f.close()


def test_an_aborted_transaction_keeps_the_committed_order(tmp_path: Path) -> None:
    """A batch that aborts after queueing URLs (some ahead of loaded ones, some spilled):
    what it admitted is forgotten by LMDB (the URLs still in memory are fetched, in order);
    the committed URLs all come out, in order, now and after a reopen."""
    f = make(tmp_path, memory_urls=4)
    committed = Model()
    with f.batch():
        for i, p in enumerate([0, 0, 1, 0, -1, 0, 3]):
            add(f, committed, f"{A}/c{i}", p)
    with pytest.raises(RuntimeError), f.batch():
        for i, p in enumerate([5, 0, 9, -2, 2]):
            add(f, None, f"{A}/x{i}", p)
        raise RuntimeError("abort")
    out = drain(f, 1.0)
    assert [u for u in out if "/c" in u] == committed.order(A)  # all of them, in order
    aborted = [u for u in out if "/x" in u]  # those that stayed in memory: in their place
    rank = {u: (-p, i) for i, (u, p) in enumerate(
        [(f"{A}/c{i}", p) for i, p in enumerate([0, 0, 1, 0, -1, 0, 3])]
        + [(f"{A}/x{i}", p) for i, p in enumerate([5, 0, 9, -2, 2])])}  # fmt: skip
    assert out == sorted(out, key=rank.__getitem__) and len(aborted) <= 4
    f.close()
    f = make(tmp_path, memory_urls=4)
    assert f.pending == 0  # all committed ones were fetched and done
    with f.batch():
        for i, p in enumerate([0, 4, 0]):
            add(f, None, f"{A}/d{i}", p)
    with pytest.raises(RuntimeError), f.batch():
        add(f, None, f"{A}/y0", 8)
        raise RuntimeError("abort")
    f.close()
    f = make(tmp_path, memory_urls=4)  # reopened: only what was committed, in order
    assert drain(f, 1.0) == [f"{A}/d1", f"{A}/d0", f"{A}/d2"]
    f.close()


def test_a_due_retry_still_goes_first(tmp_path: Path) -> None:
    f = make(tmp_path)
    for i in range(4):
        add(f, None, f"{A}/{i}", 0)
    (t,) = f.next_ready(0.0, 5)
    f.retry(t, now=0.0, delay_s=2.0)
    add(f, None, f"{A}/urgent", 100)
    add(f, None, f"{A}/urgent2", 100)
    (u,) = f.next_ready(1.0, 5)  # the retry is not due yet: the highest priority
    assert u.url == f"{A}/urgent"
    f.finish(u, 1.0)
    (r,) = f.next_ready(2.0, 5)  # due, and another URL started since: the retry first
    assert r.url == t.url and r.attempt == 1
    f.finish(r, 2.0)
    assert drain(f, 3.0) == [f"{A}/urgent2", f"{A}/1", f"{A}/2", f"{A}/3"]
    f.close()


def test_priority_zero_keeps_the_append_path(tmp_path: Path, monkeypatch: Any) -> None:
    """With every URL at priority 0 (the common case), nothing is searched or inserted: each
    URL is appended to its host's list or left in LMDB, as before priorities."""
    import frontier_crawl.frontier.frontier as module

    def refuse(*args: object, **kwargs: object) -> int:
        raise AssertionError("bisect used for priority-0 URLs")

    f = make(tmp_path, memory_urls=5)
    monkeypatch.setattr(module.bisect, "bisect", refuse)
    for i in range(20):
        add(f, None, f"{A}/{i}", 0)
    assert drain(f) == [f"{A}/{i}" for i in range(20)]
    monkeypatch.undo()
    f.close()


def test_the_ticket_and_a_redirect_keep_the_priority(tmp_path: Path) -> None:
    f = make(tmp_path)
    add(f, None, f"{A}/from", 6)
    (t,) = f.next_ready(1.0, 5)
    assert t.priority == 6
    add(f, None, f"{A}/other", 5)
    f.add([f"{A}/to"], depth=1, hops=1, referrer=t.url, priority=t.priority)  # as the engine
    f.finish(t, 1.0)
    assert drain(f, 2.0) == [f"{A}/to", f"{A}/other"]
    f.close()



def test_a_priority_0_url_goes_ahead_of_lower_ones_loaded_after_a_restart(tmp_path: Path) -> None:
    """After a restart nothing queued in this run has another priority than 0, but a refill
    loaded URLs of priority -1: a new priority-0 URL still sorts before them."""
    f = make(tmp_path)
    add(f, None, f"{A}/n0", 0)
    for i in range(3):
        add(f, None, f"{A}/m{i}", -1)
    f.close()
    f = make(tmp_path)
    (t,) = f.next_ready(1.0, 5)  # the refill loads all four: the boundary is at m2
    assert t.url == f"{A}/n0" and f.view.hot_total == 3
    add(f, None, f"{A}/z", 0)
    f.finish(t, 1.0)
    assert drain(f, 2.0) == [f"{A}/z", f"{A}/m0", f"{A}/m1", f"{A}/m2"]
    f.close()
