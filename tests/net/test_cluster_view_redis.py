"""Live summaries in a real redis-server (``cluster/view.py``): written with Redis's own clock
and a TTL, read back in one round trip as the view; a full Redis (``maxmemory``) skips a
summary at once, never waits for it, and the view can still be read."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.cluster import Keys, Redis, make_summary, read_view
from frontier_crawl.cluster.view import LIVE_TTL_S, live_key, publish_summary
from tests.redis_server import PASSWORD, RedisServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    s = RedisServer(tmp_path / "redis", password=PASSWORD)
    s.start()
    try:
        yield s
    finally:
        s.stop()


def summary(node: int, state: str = "running", pages: int = 5) -> bytes:
    return make_summary(
        node=node, state=state, pages=pages, pages_per_s=1.0, queued=2, in_flight=1, hosts=1,
        bottleneck={"name": "fetch", "detail": "all 1 fetch slot busy"}, workers=1,
        every_s=1.0, machine="here", pid=1,
    )  # fmt: skip


@pytest.mark.timeout(60)
def test_published_summaries_make_the_view(server: RedisServer) -> None:
    link, keys = Redis(server.url, 5.0), Keys("fc")
    client = server.client()
    try:
        client.set(keys.member(0), "x", px=10_000)  # node 0's membership lives; node 1's not
        assert publish_summary(link, keys, 0, "run-a", summary(0, pages=7))
        assert publish_summary(link, keys, 1, "run-b", summary(1))
        client.xadd(keys.stream(2), {b"i": b"1", b"b": b"2"})  # a batch for node 1 (2 procs)
        first = client.hgetall(live_key(keys, 0))
        time.sleep(0.05)
        assert publish_summary(link, keys, 0, "run-a", summary(0, pages=8))
        again = client.hgetall(live_key(keys, 0))
        assert again[b"joined"] == first[b"joined"] and float(again[b"at"]) > float(first[b"at"])
        assert publish_summary(link, keys, 0, "run-c", summary(0, pages=8))  # a new run
        assert float(client.hget(live_key(keys, 0), "joined") or 0) > float(first[b"joined"])
        assert 0 < client.pttl(live_key(keys, 0)) <= LIVE_TTL_S * 1000
        view = read_view(link, keys, nodes=3, processes=2)
        by = {r["node"]: r for r in view["nodes"]}
        assert by[0]["state"] == "running" and by[0]["pages"] == 8 and by[0]["heard_s"] < 1
        assert by[1]["state"] == "silent" and by[1]["batches_waiting"] == 1  # no membership
        assert by[2]["state"] == "never-joined"
        assert view["alive"] == [0] and not view["ended"]
        assert abs(view["at"] - time.time()) < 5  # Redis's clock (this machine's here)
        assert PASSWORD not in json.dumps(view)
    finally:
        link.close()
        client.close()


@pytest.mark.timeout(60)
def test_a_full_redis_skips_a_summary_at_once(server: RedisServer) -> None:
    link, keys = Redis(server.url, 30.0), Keys("fc")
    client = server.client()
    try:
        client.config_set("maxmemory", 1)  # below what Redis uses: every denyoom write refused
        started = time.monotonic()
        assert publish_summary(link, keys, 0, "run", summary(0)) is False
        assert time.monotonic() - started < 2.0  # skipped, not retried for 30 s
        # an optional write: not counted into the full-Redis fault, which would stop a node
        # that is still crawling once it lasts cluster.unreachable_timeout_s
        assert link.full_for(time.monotonic()) is None
        assert read_view(link, keys, nodes=1, processes=1)["nodes"][0]["state"] == "never-joined"
        client.config_set("maxmemory", 0)
        assert publish_summary(link, keys, 0, "run", summary(0)) is True
    finally:
        client.config_set("maxmemory", 0)
        link.close()
        client.close()
