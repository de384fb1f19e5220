"""report.html and the report's pages over time across a restart, and merged over worker
processes: real crawls of the demo web (subprocesses, stopped by SIGTERM and resumed).

Settings that differ from conftest.crawl_config's: ``politeness.min_delay_s`` 0.05 (from 0.02)
so the first run is still going when it is stopped.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site
from tests.conftest import crawl_config
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
GAP_S = 2.0  #: time between the two runs, which the series must not count as running time


def _cli(cfg: Path) -> list[str]:
    return [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)]


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _series_pages(report: dict[str, object]) -> int:
    points = report["pages_over_time"]
    assert isinstance(points, list)
    return sum(int(p[1]) for p in points)


def test_pages_over_time_cover_both_runs_and_only_running_time(
    tmp_path: Path, e2e_site: tuple[Site, DemoServer]
) -> None:
    site, server = e2e_site
    politeness = {"min_delay_s": 0.05, "user_agent": "frontier-crawl-test/0.1"}
    cfg = crawl_config(tmp_path, site, server.port, politeness=politeness)
    out = tmp_path / "out"
    first = subprocess.Popen(_cli(cfg), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_until("60 lines in crawl.jsonl", lambda: _lines(out / "crawl.jsonl") >= 60, 60,
               alive=first)  # fmt: skip
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err.decode()
    stopped = json.loads((out / "report.json").read_text())
    assert stopped["complete"] is False and stopped["runs"] == 1
    assert _series_pages(stopped) == stopped["fetched"] > 0
    assert (out / "report.html").exists()
    time.sleep(GAP_S)
    second = subprocess.run(_cli(cfg), capture_output=True, timeout=110, check=False)
    assert second.returncode == 0, second.stderr.decode()
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is True and report["runs"] == 2
    assert report["fetched"] == len(site.expected_pages(server.port))
    # every page of both runs in the series, no more
    assert _series_pages(report) == report["fetched"]
    # a bucket's rate divides by the time the crawl ran in it: the gap is not counted
    ran = sum(float(p[2]) for p in report["pages_over_time"])
    assert 0 < ran <= report["elapsed_s"] + 0.5, (ran, report["elapsed_s"])
    # where time went: the loop's phases over both runs, its wall time the crawl's
    loop = report["loop_s"]
    assert abs(loop["run"] - report["elapsed_s"]) < 1.0, (loop, report["elapsed_s"])
    assert loop["waiting"] > 0 and loop["parse"] > 0 and loop["frontier"] > 0
    assert sum(v for k, v in loop.items() if k != "run") <= loop["run"] * 1.01
    page = (out / "report.html").read_text()
    assert "complete" in page and f"{report['fetched']:,}" in page
    assert "Where time went (the crawl loop" in page
    for row in report["slowest_hosts"]:
        assert row["host"] in page


def test_worker_reports_merge_into_one_report_html(
    tmp_path: Path, e2e_site: tuple[Site, DemoServer]
) -> None:
    site, server = e2e_site
    cfg = crawl_config(tmp_path, site, server.port, workers={"processes": 2})
    proc = subprocess.run(_cli(cfg), capture_output=True, timeout=110, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    out = tmp_path / "out"
    report = json.loads((out / "report.json").read_text())
    workers = [json.loads((out / f"worker-{i}" / "report.json").read_text()) for i in (0, 1)]
    assert _series_pages(report) == report["fetched"] == sum(w["fetched"] for w in workers)
    assert report["rate_bucket_s"] == 60.0  # not the workers' widths added
    assert report["runs"] == 1  # the workers ran side by side
    hosts = {r["host"] for w in workers for r in w["slowest_hosts"]}
    assert {r["host"] for r in report["slowest_hosts"]} == hosts  # 3 hosts, split by owner
    page = (out / "report.html").read_text()
    assert all(h in page for h in hosts) and f"{report['fetched']:,}" in page
