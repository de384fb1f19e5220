"""A full Redis is one fault, bounded by ``unreachable_timeout_s`` however many calls meet it
(``cluster/client.py``). The calls are the client's seam, ``fn(client)``: each raises the reply
a full Redis gives (redis-py's OutOfMemoryError, a ResponseError) or answers; no server is
contacted (``Redis.from_url`` does not connect)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from frontier_crawl.cluster import ClusterUnavailable, Redis
from frontier_crawl.cluster.client import ClusterFull

OOM = "command not allowed when used memory > 'maxmemory'."


def refused(client: redis.Redis) -> bool:
    raise redis.exceptions.OutOfMemoryError(OOM)


def taken(client: redis.Redis) -> bool:
    return True


def test_writes_let_in_now_and_then_do_not_restart_the_clock() -> None:
    """Refused, taken, refused...: a Redis at maxmemory whose draining lets a write in now
    and then. A per-call deadline never fires (each call is answered); the fault's does."""
    link = Redis("redis://127.0.0.1:1/0", unreachable_timeout_s=0.3)
    started = time.monotonic()
    calls: list[Callable[[redis.Redis], bool]] = [refused, taken]
    with pytest.raises(ClusterFull, match=r"out of memory .*gave up after"):
        for i in range(10_000):
            link.call("adding a batch", calls[i % 2], when_full=False)
            time.sleep(0.01)
    assert 0.3 <= time.monotonic() - started < 2.0
    assert isinstance(ClusterFull("x"), ClusterUnavailable)  # exit status 1, resumable


def test_a_call_that_waits_gives_up_at_the_faults_deadline() -> None:
    """A call that waits (no when_full) while the fault began earlier: it gives up when the
    fault has lasted the timeout, not a whole timeout after its own start."""
    link = Redis("redis://127.0.0.1:1/0", unreachable_timeout_s=0.6)
    assert link.call("answering the probe", refused, when_full=False) is False
    time.sleep(0.3)
    started = time.monotonic()
    with pytest.raises(ClusterFull):
        link.call("publishing the report", refused)
    assert time.monotonic() - started < 0.55


def test_a_pause_without_refusals_ends_the_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("frontier_crawl.cluster.client.FULL_CLEAR_S", 0.2)
    link = Redis("redis://127.0.0.1:1/0", unreachable_timeout_s=0.5)
    assert link.call("a", refused, when_full=False) is False
    assert link.full_for(time.monotonic()) is not None
    time.sleep(0.3)  # longer than FULL_CLEAR_S: over
    assert link.full_for(time.monotonic()) is None
    assert link.call("a", taken, when_full=False) is True
    time.sleep(0.3)
    assert link.call("a", refused, when_full=False) is False  # a new fault: 0.5 s again
