"""A cluster crawl never adopts, and is never ended or steered by, another crawl's keys in
Redis (``cluster/crawlid.py``): every key of a crawl is under ``<key_prefix>:<crawl id>``, and
a node joins only the crawl its state belongs to.

Once a crawl started against a Redis holding a finished crawl's keys (the same configuration,
new output directories) reported ``complete: true`` with 129 of 500 pages: it read the old
crawl's ``done`` at its first quiet moment. Now such a start is refused (exit 2, naming the
crawl and the remedy) before any request; with another ``key_prefix``, or the old keys
deleted, the new crawl runs in full; the old crawl's nodes are refused by the new crawl.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import served_pages
from tests.e2e.test_cluster import (
    Node,
    assert_no_secret,
    cluster_config,
    node_cmd,
    quarter_served,
    spread,
)
from tests.redis_server import PASSWORD, RedisServer, crawl_prefix


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    yield from spread(SiteSpec(hosts=6, pages=240, crawl_delay_s=None, seed=43))


def _crawl(directory: Path, site: Site, server: DemoServer, url: str, **extra: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return cluster_config(directory, site, server.port, url, 2, **extra)


def _run(cfg: Path, timeout_s: float = 90) -> list[int]:
    nodes = [Node(cfg, n).start() for n in range(2)]
    return [node.wait(timeout_s) for node in nodes]


def _snapshot(client: object) -> dict[bytes, object]:
    """Every key of Redis with its type and a summary of its value (a changed key shows)."""
    import redis

    assert isinstance(client, redis.Redis)
    out: dict[bytes, object] = {}
    for key in client.scan_iter("*"):
        kind = client.type(key)
        if kind == b"string":
            value: object = client.get(key)
        elif kind == b"hash":
            value = sorted(client.hgetall(key).items())
        elif kind == b"stream":
            value = [e for e, _ in client.xrange(key)]
        elif kind == b"set":
            value = sorted(client.smembers(key))
        else:
            value = kind
        out[key] = value
    return {k: v for k, v in out.items() if b":live:" not in k and b":member:" not in k}


def _fetched(directory: Path) -> int:
    return sum(json.loads((directory / f"out-{n}" / "report.json").read_text())["fetched"]
               for n in range(2))  # fmt: skip


@pytest.mark.timeout(240)
def test_a_new_crawl_over_a_finished_crawls_keys(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    site, server = site_server
    expected = site.expected_pages(server.port)
    client = redis_server.client()
    first = _crawl(tmp_path / "first", site, server, redis_server.url)
    assert _run(first) == [0, 0]
    assert _fetched(tmp_path / "first") == len(expected)
    old = crawl_prefix(client)
    assert client.get(f"{old}:done")
    keys_before = _snapshot(client)
    # the same configuration, new output directories: refused before any request, the first
    # crawl's keys untouched (before: it read the first crawl's done and ended early)
    second = _crawl(tmp_path / "second", site, server, redis_server.url)
    since = len(server.log())
    nodes = [Node(second, n).start() for n in range(2)]
    codes = [node.wait(30) for node in nodes]
    logs = [n.output() for n in nodes]
    assert codes == [2, 2], [text[-2000:] for text in logs]
    for n, text in enumerate(logs):
        assert f"which node {n} has already joined" in text, text[-2000:]
        assert "another cluster.key_prefix" in text and PASSWORD not in text
    assert served_pages(server, since, wait_s=0.2) == {}
    assert _snapshot(client) == keys_before
    # another key prefix: the second crawl runs in full
    third = _crawl(tmp_path / "third", site, server, redis_server.url,
                   cluster={"key_prefix": "another"})  # fmt: skip
    since = len(server.log())
    assert _run(third) == [0, 0]
    assert set(served_pages(server, since)) == expected
    assert _fetched(tmp_path / "third") == len(expected)
    # the first crawl's keys deleted (the other remedy): a new crawl on that prefix runs in
    # full, and the first crawl's nodes are refused by it (their state is of another crawl)
    for key in client.scan_iter("frontier-crawl:*"):
        client.delete(key)
    since = len(server.log())
    assert _run(second) == [0, 0]
    assert set(served_pages(server, since)) == expected
    assert crawl_prefix(client) != old
    proc = subprocess.run(node_cmd(first, "--node", "0"), capture_output=True, text=True,
                          timeout=30)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "this node's state" in proc.stderr and "belongs to crawl" in proc.stderr, proc.stderr
    assert_no_secret(tmp_path / "first")


@pytest.mark.timeout(240)
def test_a_new_crawl_over_an_interrupted_crawls_keys(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    """Both nodes killed (-9) mid-crawl: their batches, memberships, counts and probe stay in
    Redis. A new crawl with the same configuration is refused, and one with other seeds (the
    same key prefix) too; the interrupted crawl, started again, completes: nothing of it was
    taken or changed."""
    site, server = site_server
    expected = site.expected_pages(server.port)
    client = redis_server.client()
    first = _crawl(tmp_path / "first", site, server, redis_server.url,
                   politeness={"min_delay_s": 0.05})  # fmt: skip
    since = len(server.log())
    nodes = [Node(first, n).start() for n in range(2)]
    quarter_served(server, since, expected, nodes)
    for node in nodes:
        node.kill_9()
    keys_before = _snapshot(client)
    second = _crawl(tmp_path / "second", site, server, redis_server.url)
    other = _crawl(tmp_path / "other", site, server, redis_server.url,
                   crawl={"seeds": site.seeds(server.port)[:1]})  # fmt: skip
    during = len(server.log())
    for cfg, says in ((second, "has already joined"), (other, "crawl.seeds")):
        for n in range(2):
            proc = subprocess.run(node_cmd(cfg, "--node", str(n)), capture_output=True,
                                  text=True, timeout=30)  # fmt: skip
            assert proc.returncode == 2, proc.stderr
            assert says in proc.stderr and PASSWORD not in proc.stderr, proc.stderr
    assert served_pages(server, during, wait_s=0.2) == {}
    assert _snapshot(client) == keys_before
    nodes = [Node(first, n).start() for n in range(2)]
    assert [node.wait(90) for node in nodes] == [0, 0], [n.output()[-2000:] for n in nodes]
    assert set(served_pages(server, since)) == expected
    assert_no_secret(tmp_path / "first")
