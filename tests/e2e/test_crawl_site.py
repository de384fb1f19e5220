"""End to end: crawl the generated 3-host site and check everything from the server's own log.

Like Heritrix's selftests, the fetched set must equal the site's list of expected URLs exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from frontier_crawl.config import load
from frontier_crawl.demo.server import DemoServer, politeness_violations, robots_first_violations
from frontier_crawl.demo.site import Site, SiteSpec
from frontier_crawl.engine import Engine
from tests.conftest import crawl_config, render_toml

MIN_DELAY = 0.02
MIN_DELAY_FAST = 0.01


def _url(port: int, host: str, path: str) -> str:
    return f"http://{host}:{port}{path}"


def check_crawl(
    site: Site,
    server: DemoServer,
    since: int,
    report: dict[str, Any],
    out: Path,
    min_delay: float = MIN_DELAY,
) -> None:
    port = server.port
    log = server.log()[since:]
    expected = site.expected_pages(port)
    ok = Counter(
        _url(port, e.host, e.path) for e in log if e.status == 200 and e.path != "/robots.txt"
    )
    # exactly the expected 200 pages, each exactly once
    assert set(ok) == expected
    assert all(n == 1 for n in ok.values()), [u for u, n in ok.items() if n > 1]
    # the linked 404s were tried once each (no retries for 404)
    missing = Counter(
        _url(port, e.host, e.path) for e in log if e.status == 404 and e.path != "/robots.txt"
    )
    assert set(missing) == site.expected_404(port)
    assert all(n == 1 for n in missing.values())
    # robots.txt obeyed, and fetched first
    requested = {_url(port, e.host, e.path) for e in log}
    assert not requested & site.disallowed(port)
    assert robots_first_violations(log) == []
    gaps = {h: max(min_delay, site.crawl_delay(h) or 0.0) for h in site.hosts}
    assert politeness_violations(log, min_delay, gaps) == []
    # the report and the crawl log agree with the server
    assert report["complete"] is True
    assert report["fetched"] == len(expected)
    assert report["not_found_404"] == len(site.expected_404(port))
    lines = [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]
    fetched_lines = [x for x in lines if x["outcome"] == "fetched"]
    assert {x["url"] for x in fetched_lines} == expected
    assert len(fetched_lines) == len(expected)
    assert {x["url"] for x in lines if x["outcome"] == "robots-denied"} <= site.disallowed(port)
    # WARC: one response record per fetched URL, bodies equal to what the server sent
    warcs = sorted((out / "warc").iterdir())
    assert warcs and not [p for p in warcs if p.name.endswith(".open")]
    bodies: dict[str, bytes] = {}
    responses = Counter()
    for path in warcs:
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response":
                    uri = rec.rec_headers.get_header("WARC-Target-URI")
                    responses[uri] += 1
                    if rec.http_headers.get_statuscode() == "200":
                        bodies[uri] = rec.content_stream().read()
    pages = {u: b for u, b in bodies.items() if not u.endswith("/robots.txt")}
    assert set(pages) == expected
    assert all(n == 1 for n in responses.values())
    for uri, body in pages.items():
        host, path = uri.split("://", 1)[1].split(":", 1)[0], "/" + uri.split("/", 3)[3]
        status, _ctype, sent = site.render(host, path, port)
        assert status == 200 and body == sent, uri


@pytest.mark.timeout(180)
def test_crawl_generated_site_exactly_once(
    tmp_path: Path, e2e_site: tuple[Site, DemoServer]
) -> None:
    site, server = e2e_site
    assert len(site.hosts) >= 3 and len(site.expected_pages(server.port)) >= 500
    since = len(server.log())
    cfg = crawl_config(tmp_path, site, server.port, politeness={"min_delay_s": MIN_DELAY})
    proc = subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "out"
    report = json.loads((out / "report.json").read_text())
    check_crawl(site, server, since, report, out)
    assert "fetched" in proc.stdout  # the report was printed too


@pytest.mark.timeout(180)
def test_small_memory_budget_spills_and_refills(
    tmp_path: Path, e2e_site: tuple[Site, DemoServer]
) -> None:
    site, server = e2e_site
    since = len(server.log())
    cfg = crawl_config(
        tmp_path,
        site,
        server.port,
        politeness={"min_delay_s": MIN_DELAY},
        frontier={"memory_urls": 100},
    )
    report = Engine(load(cfg)).run()
    check_crawl(site, server, since, report, tmp_path / "out")
    frontier = report["frontier"]
    assert frontier["spilled"] > 0 and frontier["refilled"] > 0
    assert frontier["peak_hot"] <= 100 + len(site.hosts)


@pytest.mark.timeout(240)
def test_crawl_at_realistic_size_with_default_settings(tmp_path: Path) -> None:
    """1,500 pages of ~24 KB over 8 hosts, crawled with the default settings but one:
    ``politeness.min_delay_s`` 1.0 -> 0.01, or 190 pages a host would take over 3 minutes.
    The WARC files (default size limit, 1 GiB) grow past their first MiB; everything is
    checked from the server's log, the WARC records (bodies byte for byte) and the report."""
    site = Site(SiteSpec(hosts=8, pages=1_500, page_bytes=22_000, crawl_delay_s=0.05, seed=11))
    with DemoServer(site) as server:
        expected = site.expected_pages(server.port)
        assert len(expected) >= 1_000
        cfg = tmp_path / "crawl.toml"
        cfg.write_text(
            render_toml(
                {
                    "crawl": {"seeds": site.seeds(server.port), "output_dir": "out"},
                    "politeness": {"min_delay_s": MIN_DELAY_FAST},
                    "fetch": {"resolve": site.resolve_entries(server.port)},
                }
            )
        )
        report = Engine(load(cfg)).run()
        check_crawl(site, server, 0, report, tmp_path / "out", min_delay=MIN_DELAY_FAST)
    warcs = list((tmp_path / "out" / "warc").iterdir())
    assert max(p.stat().st_size for p in warcs) > 1 << 20
