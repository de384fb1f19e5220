"""The bottleneck classification (a pure function of measured signals) and the sample windows."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from frontier_crawl.control.status import (
    BOTTLENECKS,
    STATUS_KEYS,
    HostHold,
    Recorder,
    Sample,
    Signals,
    classify,
    empty_status,
)

BASE = Signals(concurrency=16, in_flight=2, queued=100, hosts_total=4)


def with_(**changes: Any) -> Signals:
    return replace(BASE, **changes)


@pytest.mark.parametrize(
    ("signals", "name", "detail"),
    [
        (with_(state="finished"), "idle", "the crawl is finished"),
        (with_(stop_requested=True, in_flight=3), "draining",
         "stop requested: draining 3 transfers in flight"),
        (with_(paused=True, in_flight=1), "paused", "paused by the operator, 1 transfer finishing"),
        (with_(low_space=True, in_flight=0), "paused",
         "low disk space, 0 transfers finishing"),
        (with_(held_up="Redis is out of memory (maxmemory) for 12 s, 3 batches for other nodes "
                       "waiting, giving up in 288 s", low_space=True), "redis-full",
         "Redis is out of memory (maxmemory) for 12 s, 3 batches for other nodes waiting, "
         "giving up in 288 s"),
        (with_(hosts_total=0, in_flight=0, queued=0), "idle",
         "nothing queued and nothing in flight"),
        (with_(loop_busy=0.93, shares={"parse": 0.6, "frontier": 0.2, "warc": 0.1, "other": 0.1}),
         "cpu", "the loop is busy 93% of the time (parse 60%, frontier 20%, warc 10%)"),
        (with_(in_flight=16), "fetch", "all 16 fetch slots busy"),
        (with_(in_flight=16, dns_share=0.7), "dns", "name lookups take 70% of the transfers' time"),
        (with_(hosts_waiting=3), "politeness",
         "3 hosts waiting on their delay, 14 of 16 slots free"),
        (with_(hosts_backoff=3, hosts_waiting=1,
               worst_backoff=(HostHold("h.test", "retry-after", 120.0),
                              HostHold("g.test", "retry-after", 30.0))),
         "backoff", "3 hosts held by Retry-After, the worst h.test for 120 s"),
        (with_(hosts_backoff=2, worst_backoff=(HostHold("h.test", "backoff", 4.0),)),
         "backoff", "2 hosts held by backoff, the worst h.test for 4.0 s"),
        (with_(hosts_robots=4), "robots", "4 hosts waiting for robots.txt, 14 slots free"),
        (with_(hosts_total=1, hosts_waiting=1, in_flight=0, since_request_s=30.0,
               holds=(HostHold("a.test", "crawl-delay", 600.0),)),
         "politeness", "1 host left, next request in 600 s: its Crawl-delay"),
        (with_(hosts_total=2, hosts_waiting=2, in_flight=0, since_request_s=12.0,
               holds=(HostHold("a.test", "retry", 42.4),)),
         "politeness", "2 hosts left, next request in 42 s: a.test's retry of a failed URL"),
        (with_(hosts_total=2, hosts_blocked=2, in_flight=0), "paused",
         "all 2 hosts left are blocked"),
    ],
)  # fmt: skip
def test_classify(signals: Signals, name: str, detail: str) -> None:
    got = classify(signals)
    assert (got.name, got.detail) == (name, detail)
    assert got.name in BOTTLENECKS


def test_precedence_draining_over_everything() -> None:
    busy = with_(stop_requested=True, paused=True, loop_busy=1.0, in_flight=16)
    assert classify(busy).name == "draining"
    assert classify(with_(paused=True, loop_busy=1.0, in_flight=16)).name == "paused"
    assert classify(with_(loop_busy=0.9, in_flight=16)).name == "cpu"


def test_a_stall_is_not_claimed_while_requests_flow() -> None:
    # same hosts, but a request went out 1 s ago: the ordinary politeness sentence
    flowing = with_(hosts_total=1, hosts_waiting=1, in_flight=0, since_request_s=1.0,
                    holds=(HostHold("a.test", "crawl-delay", 600.0),))  # fmt: skip
    assert classify(flowing).detail == "1 host waiting on their delay, 16 of 16 slots free"


def sample(t: float, pages: int, waited: float, parse: float = 0.0, frontier: float = 0.0,
           dns: float = 0.0, transfer: float = 0.0, admitted: int = 0) -> Sample:  # fmt: skip
    return Sample(t, 1000.0 + t, pages, waited, parse, 0.0, 0.0, frontier, 0.0, dns, transfer,
                  admitted)  # fmt: skip


def test_recorder_windows_and_history() -> None:
    rec = Recorder()
    for i in range(41):  # 20 s, one sample per 0.5 s: 10 pages/s, waiting 30% of the time,
        t = i * 0.5  # parsing 50% and in the frontier 10% of it
        rec.add(sample(t, 5 * i, 0.3 * t, parse=0.5 * t, frontier=0.1 * t, dns=0.1 * t,
                       transfer=0.4 * t, admitted=20 * i))  # fmt: skip
    w = rec.window(sample(20.0, 200, 6.0, parse=10.0, frontier=2.0, dns=2.0, transfer=8.0,
                          admitted=800))  # fmt: skip
    assert w.seconds == pytest.approx(5.0)
    assert w.loop_busy == pytest.approx(0.7)
    assert w.shares["parse"] == pytest.approx(0.5 / 0.7)
    assert w.shares["frontier"] == pytest.approx(0.1 / 0.7)
    assert w.shares["other"] == pytest.approx(1 - 0.6 / 0.7)
    assert w.dns_share == pytest.approx(0.25)
    assert w.pages_per_s == pytest.approx(10.0)
    assert w.admitted_per_s == pytest.approx(40.0)
    assert [p[1] for p in rec.history] == list(range(0, 201, 20))  # one point per 2 s


def test_empty_status_has_every_key() -> None:
    status = empty_status()
    assert tuple(status) == STATUS_KEYS
    assert status["state"] == "starting" and status["workers"] == []


def test_one_worker_held_up_by_a_full_redis_names_the_node_bottleneck() -> None:
    """Merged over a node's workers, redis-full wins even if one worker names it: it stops
    the node unless fixed."""
    from frontier_crawl.workers import merge_status

    snaps = [
        {"worker": 0, "bottleneck": {"name": "politeness", "detail": "3 hosts waiting"}},
        {"worker": 1, "bottleneck": {"name": "politeness", "detail": "2 hosts waiting"}},
        {"worker": 2, "bottleneck": {"name": "redis-full", "detail": "Redis is out of memory"}},
    ]
    merged = merge_status(snaps)["bottleneck"]
    assert merged == {
        "name": "redis-full",
        "detail": "1 of 3 workers: worker 2: Redis is out of memory",
    }
