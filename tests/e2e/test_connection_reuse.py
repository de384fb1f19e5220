"""Connections are reused across a broad crawl's politeness delays (fetch/fetcher.py, "Idle
connections"): every host in session waits its delay between requests, so the crawl revisits
about its request rate times that delay of hosts, each of which should find its connection
still open. When the hosts in session outnumber the idle connections kept, libcurl closes
the oldest idle one to keep a new one, which is the next host's (they come back in order):
every request then opens a new connection and, at 10^6 hosts, looks its name up again
(bench/README.md, issue 29's 1-process run: 1.0 new connections per request at 4 idle
connections per fetch slot, hosts in session at about 5 per slot)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from tests.conftest import crawl_config

HOSTS = 48
#: fetch.concurrency 256 -> 4: 12 hosts in session per fetch slot (the 1-process run at 10^6
#: hosts had about 5), with 48 hosts, not thousands
CONCURRENCY = 4


@pytest.fixture(scope="module")
def broad_site() -> Iterator[tuple[Site, DemoServer]]:
    site = Site(SiteSpec(hosts=HOSTS, pages=HOSTS * 10, page_bytes=20_000, crawl_delay_s=None,
                         seed=31))  # fmt: skip
    with DemoServer(site) as server:
        yield site, server


@pytest.mark.timeout(120)
def test_hosts_in_session_keep_their_connections(
    tmp_path: Path, broad_site: tuple[Site, DemoServer]
) -> None:
    site, server = broad_site
    cfg = crawl_config(
        tmp_path,
        site,
        server.port,
        fetch={"concurrency": CONCURRENCY},
        politeness={"min_delay_s": 1.0},  # the default, not the suite's 0.02
        output={"warc": False},
    )
    proc = subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        capture_output=True, text=True, timeout=100, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = server.log()
    assert {e.host for e in log} == set(site.hosts), "every host crawled"
    connections = len({e.client_port for e in log})
    # each host's connection opened once, give or take one closed early; not one per request
    assert connections <= 2 * HOSTS, (connections, len(log))
    assert connections / len(log) < 0.25, (connections, len(log))
