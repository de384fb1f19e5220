"""Prometheus metrics after (and during) a real crawl of the 3-host demo site, read back with
prometheus_client's own text parser and checked against the report and the files on disk."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from frontier_crawl.config import load
from frontier_crawl.control.metrics import render_metrics
from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site
from frontier_crawl.engine import Engine
from tests.conftest import crawl_config

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: bytes) -> tuple[Samples, dict[str, str]]:
    """(sample name and labels -> value, family name -> type) of a Prometheus text page."""
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text.decode()):
        types[family.name] = family.type
        for s in family.samples:
            assert isinstance(s, Sample)
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, types


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    return samples[(metric, tuple(sorted({"worker": "0", **labels}.items())))]


@pytest.mark.timeout(120)
def test_metrics_of_a_real_crawl(tmp_path: Path, e2e_site: tuple[Site, DemoServer]) -> None:
    site, server = e2e_site
    # min_delay_s 0.02 (crawl_config's): 540 pages over 3 hosts at the default 1 s is minutes
    cfg = crawl_config(tmp_path, site, server.port)
    engine = Engine(load(cfg))
    during: list[bytes] = []
    done = threading.Event()

    def scrape() -> None:  # as the control server's thread does, once a second (here 5/s)
        while not done.is_set():
            during.append(render_metrics([engine.metrics()]))
            time.sleep(0.2)

    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    try:
        report = engine.run()
    finally:
        done.set()
        thread.join(5)
    assert report["complete"]

    # during the crawl: parseable, and consistent with itself
    mid = [parse(text)[0] for text in during]
    assert len(mid) >= 5
    for m in mid:
        assert value(m, "frontier_crawl_transfers_in_flight") <= value(
            m, "frontier_crawl_fetch_slots"
        )
    requests = [value(m, "frontier_crawl_requests_total") for m in mid]
    assert requests == sorted(requests) and requests[-1] > requests[0]
    assert any(value(m, "frontier_crawl_queued_urls", where="memory") > 0 for m in mid)
    assert any(value(m, "frontier_crawl_pages_per_second") > 0 for m in mid)
    assert any(value(m, "frontier_crawl_hosts", state="waiting") > 0 for m in mid)

    # after it: every number matches the report and the files
    samples, types = parse(render_metrics([engine.metrics()]))
    assert types["frontier_crawl_fetch_duration_seconds"] == "histogram"
    assert types["frontier_crawl_pages"] == "counter"
    assert types["frontier_crawl_hosts"] == "gauge"
    for outcome, n in report["outcomes"].items():
        assert value(samples, "frontier_crawl_pages_total", outcome=outcome) == n
    assert value(samples, "frontier_crawl_pages_total", outcome="fetched") == report["fetched"]
    assert value(samples, "frontier_crawl_bytes_total") == report["bytes"]
    requests = value(samples, "frontier_crawl_requests_total")
    assert requests == sum(report["outcomes"].values()) - report["outcomes"].get(
        "robots-denied", 0
    )
    assert value(samples, "frontier_crawl_fetch_duration_seconds_count") == requests
    assert value(samples, "frontier_crawl_fetch_duration_seconds_bucket", le="+Inf") == requests
    assert 0 < value(samples, "frontier_crawl_fetch_duration_seconds_sum") < requests * 5
    assert value(samples, "frontier_crawl_queued_urls", where="memory") == 0
    assert value(samples, "frontier_crawl_queued_urls", where="disk") == 0
    assert value(samples, "frontier_crawl_transfers_in_flight") == 0
    for state in ("ready", "waiting", "backoff", "robots", "blocked"):
        assert value(samples, "frontier_crawl_hosts", state=state) == 0
    assert value(samples, "frontier_crawl_seen_urls") == report["seen"]["count"] > 0
    assert not [name for name in samples if "bloom" in str(name)]
    assert value(samples, "frontier_crawl_admitted_urls_total") == report["frontier"]["admitted"]
    warc_bytes = sum(p.stat().st_size for p in (tmp_path / "out" / "warc").iterdir())
    assert value(samples, "frontier_crawl_warc_bytes") == warc_bytes
    assert value(samples, "frontier_crawl_commits_total") >= 1
    assert value(samples, "frontier_crawl_commit_seconds_total") > 0
    assert value(samples, "frontier_crawl_callback_seconds_total") == 0  # no spider callbacks
    assert value(samples, "frontier_crawl_loop_seconds_total", phase="parse") > 0
    assert value(samples, "frontier_crawl_bottleneck", name="idle") == 1
    assert sum(
        value(samples, "frontier_crawl_bottleneck", name=n)
        for n in ("politeness", "fetch", "cpu", "backoff", "robots", "dns", "draining", "paused")
    ) == 0
