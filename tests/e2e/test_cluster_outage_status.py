"""While Redis is down mid-crawl, a node's status names it (``redis-unreachable``: which Redis,
password hidden, for how long, the error, when the node gives up), as ``frontier-crawl ctl
status`` prints it, and ``frontier-crawl report`` fails within seconds with a clear message
instead of waiting ``cluster.unreachable_timeout_s``. Redis back, the crawl completes.

Before: the status said ``starting`` / ``no worker has reported yet`` for the whole outage
(every worker blocked in a Redis call does not answer the coordinator), and ``report`` waited
the whole timeout.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.e2e.test_cluster import (
    Node,
    assert_no_secret,
    check_crawl,
    cluster_config,
    node_cmd,
    quarter_served,
    spread,
)
from tests.e2e.test_cluster_faults import stop_all
from tests.redis_server import PASSWORD, RedisServer
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    yield from spread(SiteSpec(hosts=8, pages=400, crawl_delay_s=None, seed=31))


@pytest.mark.timeout(180)
def test_status_and_report_while_redis_is_down(
    tmp_path: Path, site_server: tuple[Site, DemoServer], redis_server: RedisServer
) -> None:
    site, server = site_server
    since = len(server.log())
    cfg = cluster_config(
        tmp_path, site, server.port, redis_server.url, 2,
        politeness={"min_delay_s": 0.05}, control={"listen": "127.0.0.1:0"},
        cluster={"unreachable_timeout_s": 120.0},
    )  # fmt: skip
    expected = site.expected_pages(server.port)
    nodes = [Node(cfg, n).start() for n in range(2)]
    try:
        quarter_served(server, since, expected, nodes)
        redis_server.kill()  # kill -9, by its PID
        where = f"redis://:***@127.0.0.1:{redis_server.port}/0"  # (the password hidden)
        said: list[str] = []

        def status_names_redis() -> bool:
            proc = subprocess.run(node_cmd(cfg, "ctl", "--node", "0", "status"),
                                  capture_output=True, text=True, timeout=60)  # fmt: skip
            said.append(proc.stdout + proc.stderr)
            return proc.returncode == 0 and "bottleneck redis-unreachable" in proc.stdout

        wait_until("node 0's status to name Redis", status_names_redis, 60, every_s=0.5,
                   alive=[n.proc for n in nodes if n.proc], detail=lambda: said[-1:])  # fmt: skip
        text = said[-1]
        assert f"Redis at {where} unreachable for" in text, text
        assert "giving up in" in text and "state      running" in text, text
        assert "no worker has reported yet" not in text and PASSWORD not in text, text
        started = time.monotonic()
        report = subprocess.run(node_cmd(cfg, "report"), capture_output=True, text=True,
                                timeout=60)  # fmt: skip
        took = time.monotonic() - started
        said_report = report.stdout + report.stderr
        assert report.returncode == 1, said_report
        assert f"Redis at {where} unreachable" in report.stderr, said_report
        assert "the report command waits 3 s for Redis" in report.stderr, said_report
        assert "Traceback" not in said_report and PASSWORD not in said_report, said_report
        assert took < 15.0, took  # (before: cluster.unreachable_timeout_s, 120 s here)
        print(f"report failed after {took:.1f} s with Redis down")
        redis_server.start()  # the same port and AOF: the nodes go on
        codes = [node.wait(120) for node in nodes]
    finally:
        stop_all(*nodes)
    assert codes == [0, 0], [n.output()[-2000:] for n in nodes]
    check_crawl(site, server, since, tmp_path, 2, refetch_bound=2 * 8)
    assert_no_secret(tmp_path)
