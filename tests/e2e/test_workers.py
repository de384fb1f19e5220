"""workers.processes = 2: hosts partitioned over two processes, links exchanged in batches, the
crawl ends by itself; checked from the server's log, the workers' WARC files and the merged
report. Also: kill -9 of the whole process group, then resume."""

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
from tests.conftest import crawl_config, render_toml, served_pages, warc_response_uris

DELAY = 0.02


@pytest.fixture(scope="module")
def site_server() -> Iterator[tuple[Site, DemoServer]]:
    """The site served on a port that splits its hosts over both workers.

    Owners hash the origin, port included, and the port is picked at random: with 5 hosts,
    one port in 16 gives every host to one worker, and then no link crosses between workers
    (the partition these tests are about). Such a port is skipped.
    """
    site = Site(SiteSpec(hosts=5, pages=300, crawl_delay_s=None, seed=23))
    for _ in range(20):
        with DemoServer(site) as server:
            origins = {origin(url) for url in site.expected_pages(server.port)}
            if {owner_of(o, 2) for o in origins} == {0, 1}:
                yield site, server
                return
    pytest.fail("20 ports in a row gave every host to one worker")


def cli(cfg: Path) -> list[str]:
    return [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)]


def check(site: Site, server: DemoServer, since: int, out: Path, refetch_bound: int) -> None:
    log = server.log()[since:]
    expected = site.expected_pages(server.port)
    fetched = served_pages(server, since)
    assert set(fetched) == expected
    assert sum(n - 1 for n in fetched.values()) <= refetch_bound
    assert robots_first_violations(log) == []
    assert politeness_violations(log, DELAY) == []
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is True and report["workers"] == 2
    assert report["fetched"] == len(expected)
    archived: Counter[str] = Counter()
    owners: dict[str, set[int]] = {}
    for w in (0, 1):
        warcs = list((out / f"worker-{w}" / "warc").iterdir())
        assert warcs and all(p.name.endswith(".warc.gz") for p in warcs)
        for uri in warc_response_uris(warcs):
            archived[uri] += 1
            owners.setdefault(uri.split("/")[2], set()).add(w)
    assert expected <= set(archived)
    assert all(len(ws) == 1 for ws in owners.values()), owners  # each host in one worker only
    # the worker its origin hashes to
    assert all(ws == {owner_of(origin(f"http://{h}/"), 2)} for h, ws in owners.items()), owners
    assert {w for ws in owners.values() for w in ws} == {0, 1}  # and both workers had hosts


@pytest.mark.timeout(120)
def test_two_workers_crawl_exactly_once(
    tmp_path: Path, site_server: tuple[Site, DemoServer]
) -> None:
    site, server = site_server
    since = len(server.log())
    cfg = crawl_config(
        tmp_path,
        site,
        server.port,
        workers={"processes": 2},
        politeness={"min_delay_s": DELAY, "delay_factor": 0.0},
    )
    proc = subprocess.run(cli(cfg), capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check(site, server, since, tmp_path / "out", refetch_bound=0)
    # the worker count is part of the crawl's identity
    crawl_config(tmp_path, site, server.port, workers={"processes": 3})
    proc = subprocess.run(cli(cfg), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "run by 2 worker process(es)" in proc.stderr


@pytest.mark.timeout(180)
def test_two_workers_survive_kill_9(tmp_path: Path, site_server: tuple[Site, DemoServer]) -> None:
    site, server = site_server
    since = len(server.log())
    cfg = crawl_config(
        tmp_path,
        site,
        server.port,
        workers={"processes": 2},
        politeness={"min_delay_s": 0.05, "delay_factor": 0.0},
    )
    for moment in (1.5, 2.5):
        proc = subprocess.Popen(cli(cfg), start_new_session=True, stdout=subprocess.DEVNULL)
        time.sleep(moment)
        os.killpg(proc.pid, signal.SIGKILL)  # coordinator and both workers at once
        proc.wait(timeout=10)
    proc = subprocess.run(cli(cfg), capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # per kill and host: one in flight + what one 0.05 s commit interval completes at 0.05 s delay
    check(site, server, since, tmp_path / "out", refetch_bound=2 * 5 * 3)


@pytest.mark.timeout(120)
def test_links_waiting_in_the_outbox_keep_the_crawl_going(tmp_path: Path) -> None:
    """A worker with links for another worker's host in its in-memory outbox, waiting for the
    group commit, is not idle: the crawl must not end before they are delivered and fetched.

    ``frontier.commit_interval_s`` = 1.0 (default 0.05) widens the window the defect needs: a
    slow page (1.5 s) ends, its link to the other worker's host waits for the next commit."""
    from tests.scripted_server import NOT_FOUND, Answer, ScriptedServer, page

    def script(host: str, path: str, nth: int) -> Answer:
        if path == "/robots.txt":
            return NOT_FOUND
        if host == slow_host and path == "/":
            return Answer(200, page("http://" + f"{other_host}:{srv.port}/x").body, delay_s=1.5)
        return page()

    with ScriptedServer(script) as srv:
        names = [f"h{i}.test" for i in range(64)]
        by_owner: dict[int, str] = {}
        for name in names:
            by_owner.setdefault(owner_of(origin(srv.url(name, "/")), 2), name)
        slow_host, other_host = by_owner[0], by_owner[1]
        cfg = tmp_path / "crawl.toml"
        cfg.write_text(
            render_toml(
                {
                    "crawl": {"seeds": [srv.url(slow_host, "/")], "output_dir": "out"},
                    "scope": {"allow_domains": [slow_host, other_host]},
                    "politeness": {"min_delay_s": 0.02},
                    "fetch": {"resolve": srv.resolve(slow_host, other_host)},
                    "frontier": {"commit_interval_s": 1.0},
                    "workers": {"processes": 2},
                    "output": {"progress_interval_s": 0.0},
                }
            )
        )
        proc = subprocess.run(cli(cfg), capture_output=True, text=True, timeout=100)
        log = srv.log()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (other_host, "/x") in {(e.host, e.path) for e in log}, log
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["complete"] is True and report["fetched"] == 2
