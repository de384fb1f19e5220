"""One crawl over several nodes with a real redis-server as transport (``cluster/``).

Nodes are separate process trees (``frontier-crawl --config crawl.toml --node i``, each in its
own session) on loopback, with separate output directories (``output_dir = "out-{node}"``),
crawling the demo web; exactness and politeness are checked from the demo server's log, host
ownership from the nodes' WARC files. Redis runs with AOF and ``appendfsync always``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer, politeness_violations, robots_first_violations
from frontier_crawl.demo.site import Site, SiteSpec
from frontier_crawl.frontier.mailbox import owner_of
from frontier_crawl.frontier.urls import origin
from tests.conftest import crawl_config, served_pages, warc_response_uris
from tests.redis_server import RedisServer, free_port

DELAY = 0.02
NODES = 3
PASSWORD = "s3cret-Pa55word"  # must never appear in any output


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    """8 hosts, ~400 pages, on a port that gives every one of 3 partitions some hosts (owners
    hash the origin, port included: a port that does not is skipped)."""
    site = Site(SiteSpec(hosts=8, pages=400, crawl_delay_s=None, seed=31))
    for _ in range(20):
        with DemoServer(site) as server:
            origins = {origin(url) for url in site.expected_pages(server.port)}
            if {owner_of(o, NODES) for o in origins} == set(range(NODES)) and {
                owner_of(o, 2) for o in origins
            } == {0, 1}:
                yield site, server
                return
    pytest.fail("20 ports in a row left a partition without hosts")


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", password=PASSWORD)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def node_cmd(cfg: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg), *args]


class Node:
    """One node's process tree, its output in files."""

    def __init__(self, cfg: Path, node: int) -> None:
        self.cfg, self.node = cfg, node
        self.log = cfg.parent / f"node-{node}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Node:
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            node_cmd(self.cfg, "--node", str(self.node)),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        return self

    def kill_9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)  # coordinator and its workers at once
        self.proc.wait(timeout=10)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            pytest.fail(f"node {self.node} did not end: {self.log.read_text()[-3000:]}")

    def output(self) -> str:
        return self.log.read_text()


def cluster_config(tmp_path: Path, site: Site, port: int, url: str, nodes: int, **extra: dict
                   ) -> Path:  # fmt: skip
    sections: dict[str, dict[str, object]] = {
        "crawl": {"output_dir": "out-{node}"},
        "politeness": {"min_delay_s": DELAY, "delay_factor": 0.0},
        "cluster": {"redis_url": url, "nodes": nodes},
    }
    for name, values in extra.items():
        sections.setdefault(name, {}).update(values)
    return crawl_config(tmp_path, site, port, **sections)  # type: ignore[arg-type]


def check_crawl(
    site: Site, server: DemoServer, since: int, tmp_path: Path, nodes: int, refetch_bound: int
) -> Counter[str]:
    """Every page once (refetches bounded), robots.txt first, polite, each host in its owner
    partition only; returns the pages served."""
    log = server.log()[since:]
    expected = site.expected_pages(server.port)
    fetched = served_pages(server, since)
    assert set(fetched) == expected
    assert sum(n - 1 for n in fetched.values()) <= refetch_bound, fetched.most_common(5)
    assert robots_first_violations(log) == []
    assert politeness_violations(log, DELAY) == []
    owners: dict[str, set[int]] = {}
    for n in range(nodes):
        warcs = list((tmp_path / f"out-{n}" / f"worker-{n}" / "warc").iterdir())
        for uri in warc_response_uris(warcs):
            owners.setdefault(uri.split("/")[2], set()).add(n)
    assert all(ws == {owner_of(origin(f"http://{h}/"), nodes)} for h, ws in owners.items()), owners
    assert {w for ws in owners.values() for w in ws} == set(range(nodes))
    return fetched


def assert_no_secret(tmp_path: Path) -> None:
    for path in tmp_path.glob("node-*.log"):
        text = path.read_text()
        assert PASSWORD not in text, path
        assert "Traceback" not in text, text[-3000:]


@pytest.mark.timeout(90)
def test_three_nodes_crawl_exactly_once(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    site, server = site_server
    since = len(server.log())
    cfg = cluster_config(tmp_path, site, server.port, redis_server.url, NODES)
    # a --node out of range is refused before anything is written
    proc = subprocess.run(node_cmd(cfg, "--node", "3"), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "--node 3 is out of range" in proc.stderr, proc.stderr
    started = time.monotonic()
    nodes = [Node(cfg, n).start() for n in range(NODES)]
    codes = [node.wait(75) for node in nodes]
    elapsed = time.monotonic() - started
    assert codes == [0] * NODES, [n.output()[-2000:] for n in nodes]
    check_crawl(site, server, since, tmp_path, NODES, refetch_bound=0)
    assert_no_secret(tmp_path)
    # Redis holds nothing of the crawl but counters once it is over: every batch acknowledged
    client = redis_server.client()
    sent, acked = (int(x) for x in client.hmget("frontier-crawl:counts", ["sent", "acked"]))
    assert sent == acked and sent > 0
    assert all(client.xlen(f"frontier-crawl:p:{p}") == 0 for p in range(NODES))
    # the cluster's report, from any node: the sum of the nodes' reports
    proc = subprocess.run(node_cmd(cfg, "report"), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = {int(k): json.loads(v) for k, v in client.hgetall("frontier-crawl:reports").items()}
    assert sorted(reports) == list(range(NODES))
    total = sum(r["fetched"] for r in reports.values())
    assert total == len(site.expected_pages(server.port))
    assert f"{total:,}" in proc.stdout or str(total) in proc.stdout
    assert PASSWORD not in proc.stdout + proc.stderr
    print(f"3 nodes: {total} pages in {elapsed:.1f} s, {sent} batches over Redis")
