"""A continuous crawl ([recrawl]) over two cluster nodes (a real redis-server): each node keeps
the schedule of the hosts its partition owns, before and after a restart of both.

Checked from the nodes' WARC files and reports: every record (response or revisit) of a host is
in the WARC of the node that owns it; each node's schedule holds exactly its hosts' pages; after
SIGTERM to both and the same commands again, the revisits go on (conditional, from the right
node), the schedules unchanged in size.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from frontier_crawl.frontier.mailbox import owner_of
from frontier_crawl.frontier.urls import origin
from tests.conftest import render_toml
from tests.e2e.test_cluster import Node
from tests.recrawl_site import PATHS, RecrawlSite
from tests.redis_server import RedisServer
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

HOSTS = 4
PAGES = len(PATHS) + 1  #: per host, with its index


@pytest.fixture
def site() -> Iterator[RecrawlSite]:
    """Hosts on both partitions (their ports are random: a draw that gives one node all of
    them is served again)."""
    for _ in range(20):
        with RecrawlSite(hosts=HOSTS, fast_period_s=3.0, vanish_after_s=1e9) as s:
            if {owner_of(origin(u), 2) for u in s.seeds()} == {0, 1}:
                yield s
                return
    pytest.fail("20 draws in a row left a node without hosts")


def records(root: Path) -> list[tuple[str, str]]:
    """(record type, target URI) of the response and revisit records in a node's WARCs."""
    out = []
    for path in sorted(root.rglob("warc/*.warc.gz")):
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                rec.content_stream().read()
                if rec.rec_type in ("response", "revisit"):
                    out.append((rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI")))
    return out


def test_schedules_stay_per_partition(
    tmp_path: Path, site: RecrawlSite, redis_server: RedisServer
) -> None:
    cfg = tmp_path / "crawl.toml"
    # intervals of seconds (1 to 5) and min_delay_s 1.0 -> 0.25 so that every page is
    # revisited within seconds; one process per node (the default, one per core, would vary
    # with the machine)
    cfg.write_text(render_toml({
        "crawl": {"seeds": site.seeds(), "output_dir": "out-{node}"},
        "politeness": {"min_delay_s": 0.25},
        "fetch": {"resolve": site.resolve_entries()},
        "workers": {"processes": 1},
        "cluster": {"redis_url": redis_server.url, "nodes": 2},
        "recrawl": {"enabled": True, "min_interval_s": 1.0, "initial_interval_s": 1.5,
                    "max_interval_s": 5.0},
    }))  # fmt: skip
    owners = {origin(u): owner_of(origin(u), 2) for u in site.seeds()}
    reports: list[dict[str, Any]] = []
    for run in range(2):
        since = len(site.hits())
        nodes = [Node(cfg, n).start() for n in (0, 1)]
        procs = [n.proc for n in nodes if n.proc is not None]

        def revisited(since: int = since) -> bool:
            counts = Counter((h.host, h.path) for h in site.pages(since) if h.conditional)
            return len(counts) == (PAGES - 1) * HOSTS and min(counts.values()) >= 2  # not /plain

        try:
            wait_until(f"run {run}: every page revisited twice", revisited, 120, every_s=0.2,
                       alive=procs, detail=lambda ns=nodes: [n.output()[-1500:] for n in ns],
                       )  # fmt: skip
        finally:
            for n in nodes:
                if n.proc is not None and n.proc.poll() is None:
                    os.killpg(n.proc.pid, signal.SIGTERM)
        for n in nodes:
            assert n.wait(60) == 0, n.output()[-3000:]
            assert "Traceback" not in n.output(), n.output()[-3000:]
        reports = [json.loads((tmp_path / f"out-{i}" / "report.json").read_text())
                   for i in (0, 1)]  # fmt: skip
        for i, report in enumerate(reports):
            mine = sum(1 for o in owners.values() if o == i)
            fresh = report["freshness"]
            assert fresh["enabled"] is True
            assert fresh["scheduled"] == PAGES * mine, (i, fresh, owners)
    for i in (0, 1):
        found = records(tmp_path / f"out-{i}")
        assert {t for t, _ in found} == {"response", "revisit"}, Counter(t for t, _ in found)
        strangers = {origin(uri) for _, uri in found if owners[origin(uri)] != i}
        assert not strangers, (i, strangers)
