"""A spider crawl on a cluster, unchanged: three nodes over a real redis-server run the same
two-callback spider with meta (the one of ``test_items_crash.py``); requests a page yields for
another node's hosts travel through Redis with their callback and meta. Each node writes its
own feeds (``out-<node>/worker-<partition>/items.jsonl``). Node 1 is killed with -9 mid-crawl
and started again: read together, the feeds hold every page's item exactly once, each with the
fields its request's meta carried from the page that found it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from frontier_crawl.frontier.mailbox import owner_of
from frontier_crawl.frontier.urls import origin
from tests.conftest import served_pages
from tests.e2e.test_cluster import (
    NODES,
    Node,
    assert_no_secret,
    check_crawl,
    cluster_config,
    spread,
)
from tests.e2e.test_items_crash import SPIDER, tag
from tests.redis_server import RedisServer
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    """8 hosts, 600 pages of 20 to 40 KB, every node owning some."""
    yield from spread(
        SiteSpec(hosts=8, pages=600, page_bytes=20_000, page_bytes_max=40_000,
                 crawl_delay_s=None, seed=41)
    )  # fmt: skip


def read_feeds(tmp_path: Path) -> list[dict[str, Any]]:
    """Every node's feeds read together (one file per worker: see docs/spiders.md)."""
    items = []
    for path in sorted(tmp_path.glob("out-*/worker-*/items.jsonl")):
        with path.open(encoding="utf-8") as fh:
            items += [json.loads(line) for line in fh]
    return items


@pytest.mark.timeout(150)
def test_spider_on_three_nodes_items_exactly_once_across_a_node_kill_9(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    site, server = site_server
    since = len(server.log())
    (tmp_path / "level_spider.py").write_text(SPIDER)
    # min_delay_s 0.05 (cluster_config: the test's time) so that node 1 is mid-crawl when killed
    cfg = cluster_config(
        tmp_path, site, server.port, redis_server.url, NODES,
        politeness={"min_delay_s": 0.05}, spider={"source": "level_spider.py"},
    )  # fmt: skip
    nodes = [Node(cfg, n).start() for n in range(NODES)]
    expected = site.expected_pages(server.port)
    of_1 = {u for u in expected if owner_of(origin(u), NODES) == 1}
    wait_until("node 1 part-way through its hosts",
               lambda: 0 < len(set(served_pages(server, since, wait_s=0.0)) & of_1)
               < len(of_1) // 2, 60, alive=[n.proc for n in nodes if n.proc])  # fmt: skip
    nodes[1].kill_9()
    nodes[1].start()
    codes = [node.wait(100) for node in nodes]
    assert codes == [0] * NODES, [n.output()[-2000:] for n in nodes]
    hosts_1 = {origin(u) for u in of_1}
    check_crawl(site, server, since, tmp_path, NODES, refetch_bound=3 * len(hosts_1))
    assert_no_secret(tmp_path)

    items = read_feeds(tmp_path)
    counts = Counter(item["url"] for item in items)
    assert set(counts) == expected, (
        f"missing {sorted(expected - set(counts))[:5]}, extra {sorted(set(counts) - expected)[:5]}"
    )
    twice = [url for url, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} items twice, e.g. {twice[:5]}"
    by_url = {item["url"]: item for item in items}
    seeds = set(site.seeds(server.port))
    crossed = 0  # items whose request came from a page of another node
    for url, item in by_url.items():
        assert item["tag"] == tag(url), item  # the meta came with its own URL
        if url in seeds:
            assert (item["kind"], item["level"], item["parent"]) == ("home", 0, None)
            continue
        parent = by_url[item["parent"]]
        assert item["kind"] == "page" and item["level"] == parent["level"] + 1
        crossed += owner_of(origin(url), NODES) != owner_of(origin(item["parent"]), NODES)
    assert crossed > 0  # callback and meta crossed nodes through Redis
    reports = [json.loads(p.read_text()) for p in tmp_path.glob("out-*/report.json")]
    assert sum(r["spider"]["items"] for r in reports) == len(expected)
    assert all(r["spider"]["problems"] == 0 for r in reports)
