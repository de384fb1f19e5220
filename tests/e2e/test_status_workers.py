"""With worker processes, the one control API serves the whole crawl's status (every worker's,
merged) and metrics (one ``worker`` label per process), from a real crawl subprocess.

Settings that differ from the defaults, beyond conftest.crawl_config's (and why):
* ``workers.processes`` 1 -> 2: the subject; ``control.listen = "127.0.0.1:0"``: the API is
  off by default, port 0 so tests never collide;
* ``min_delay_s`` 0.02 -> 0.05: the crawl lasts several seconds, long enough to be watched.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from frontier_crawl.control.status import BOTTLENECKS, STATUS_KEYS
from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import crawl_config, spread_server
from tests.control_client import Api, finish, start_crawl
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def web() -> Iterator[tuple[Site, DemoServer]]:
    """4 hosts, 400 pages of >= 20 KB, on a port that gives both workers hosts (the owner
    hashes the origin, port included: with 4 hosts, 1 port in 8 leaves a worker none)."""
    yield from spread_server(
        Site(SiteSpec(hosts=4, pages=400, crawl_delay_s=None, seed=17, page_bytes=20_000)), 2
    )


def test_one_api_for_two_workers(tmp_path: Path, web: tuple[Site, DemoServer]) -> None:
    site, server = web
    cfg = crawl_config(tmp_path, site, server.port, control={"listen": "127.0.0.1:0"},
                       politeness={"min_delay_s": 0.05}, workers={"processes": 2})  # fmt: skip
    proc = start_crawl(cfg)
    try:
        api = Api(tmp_path / "out")
        status = wait_until(
            "both workers fetching",
            lambda: (s := api.status())["pages"] > 20 and len(s["workers"]) == 2 and s,
        )
        assert set(STATUS_KEYS) <= set(status)
        workers = status["workers"]
        assert sorted(w["worker"] for w in workers) == [0, 1]
        assert status["pages"] == sum(w["pages"] for w in workers)
        assert status["in_flight"] == sum(w["in_flight"] for w in workers)
        assert status["hosts"]["total"] == sum(w["hosts"]["total"] for w in workers)
        assert status["bottleneck"]["name"] in BOTTLENECKS
        assert status["bottleneck"]["detail"]
        assert all(w["bottleneck"]["name"] in BOTTLENECKS for w in workers)
        assert 0.0 <= status["cpu"]["loop_busy"] <= 1.0
        # the coordinator keeps the history: one point per status asked for, 2 s apart at most
        time.sleep(2.1)
        later = api.status()
        assert len(later["history"]) >= 2
        assert later["history"][-1][1] >= later["history"][0][1]

        samples: dict[tuple[str, str], float] = {}
        for family in text_string_to_metric_families(api.get("/metrics").decode()):
            for s in family.samples:
                if s.name == "frontier_crawl_requests_total":
                    samples[(s.name, s.labels["worker"])] = s.value
                if s.name == "frontier_crawl_pages_total" and s.labels["outcome"] == "fetched":
                    samples[(s.name, s.labels["worker"])] = s.value
        assert {w for _n, w in samples} == {"0", "1"}
        assert all(samples[("frontier_crawl_requests_total", w)] > 0 for w in ("0", "1"))
    finally:
        finish(proc, timeout_s=90)
