"""End to end: examples/catalogue run as a user runs them, items compared with the ground truth.

The example configs are copied as they are; only the demo port (8080 in the files) becomes the
test server's, and the crawl runs through the command line (``frontier-crawl --config``). Every
other key is the example's own: min_delay_s = 0 and delay_factor = 0 there because the demo web
is local; WARC off (the example collects items only).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from frontier_crawl.demo.server import DemoServer, robots_first_violations
from frontier_crawl.demo.site import Site, SiteSpec
from tests.control_client import Api
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "catalogue"
#: 300 products (a fifth with pages of 20 to 40 KB), 5 categories, 12 per listing page;
#: the rest of the demo web is small because the examples never leave /shop/
SPEC = SiteSpec(hosts=2, pages=40, crawl_delay_s=None, products=300)
EXAMPLE_PORT = "8080"


def _copy_example(tmp_path: Path, port: int, *extra: str) -> None:
    for path in EXAMPLE.iterdir():
        if path.suffix in (".toml", ".py"):
            text = path.read_text().replace(f":{EXAMPLE_PORT}", f":{port}")
            (tmp_path / path.name).write_text(text + "".join(extra))


def _run(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=100,
        cwd=config.parent,
    )


def _items(out: Path) -> list[dict[str, Any]]:
    feeds = sorted(out.rglob("items.jsonl"))
    assert feeds, f"no items.jsonl under {out}"
    items: list[dict[str, Any]] = []
    for feed in feeds:
        with feed.open(encoding="utf-8") as fh:
            items += [json.loads(line) for line in fh]
    return items


def _problems(out: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for log in out.rglob("crawl.jsonl"):
        lines += [json.loads(x) for x in log.read_text().splitlines()]
    assert lines
    fine = ("fetched", "robots-txt")  # anything else (callback-error, failed, ...) is a problem
    return [x for x in lines if x["outcome"] not in fine]


def _by_url(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    urls = Counter(item["url"] for item in items)
    assert all(n == 1 for n in urls.values()), [u for u, n in urls.items() if n > 1]
    return {item["url"]: item for item in items}


def _check_server_log(server: DemoServer, site: Site) -> None:
    log = server.log()
    assert robots_first_violations(log) == []
    paths = Counter(e.path for e in log if e.path != "/robots.txt")
    assert all(p.startswith("/shop/") for p in paths), [p for p in paths if "/shop/" not in p]
    assert all(n == 1 for n in paths.values())  # every page fetched once
    products = {str(p["url"]).split(f":{server.port}", 1)[1] for p in site.products(server.port)}
    assert products <= set(paths)


def test_spider_example_two_levels_with_meta(tmp_path: Path) -> None:
    site = Site(SPEC)
    with DemoServer(site) as server:
        _copy_example(tmp_path, server.port)
        proc = _run(tmp_path / "crawl.toml")
        assert proc.returncode == 0, proc.stderr
        _check_server_log(server, site)
        truth = site.products(server.port)
    out = tmp_path / "catalogue-output"
    items = _by_url(_items(out))
    assert items == {p["url"]: p for p in truth}  # every field, "listing" from meta included
    assert _problems(out) == []


def test_rules_example_no_code(tmp_path: Path) -> None:
    site = Site(SPEC)
    with DemoServer(site) as server:
        _copy_example(tmp_path, server.port)
        proc = _run(tmp_path / "rules.toml")
        assert proc.returncode == 0, proc.stderr
        _check_server_log(server, site)
        truth = site.products(server.port)
    out = tmp_path / "catalogue-rules-output"
    items = _by_url(_items(out))
    assert items == {p["url"]: {k: v for k, v in p.items() if k != "listing"} for p in truth}
    assert _problems(out) == []


def test_spider_and_rules_combined(tmp_path: Path) -> None:
    """The spider's items and the rules' items, both, for each product page."""
    site = Site(SPEC)
    rule = (EXAMPLE / "rules.toml").read_text().split("\n[[extract]]\n", 1)[1]
    rule = rule.replace('required = ["name"]', 'required = ["name"]\nurl_field = "page"')
    with DemoServer(site) as server:
        _copy_example(tmp_path, server.port)
        config = tmp_path / "crawl.toml"
        config.write_text(config.read_text() + "\n[[extract]]\n" + rule)
        proc = _run(config)
        assert proc.returncode == 0, proc.stderr
        truth = site.products(server.port)
    items = _items(tmp_path / "catalogue-output")
    from_rules = [i for i in items if "page" in i]
    from_spider = [i for i in items if "url" in i]
    assert len(from_rules) + len(from_spider) == len(items) == 2 * len(truth)
    assert _by_url(from_spider) == {p["url"]: p for p in truth}
    assert sorted(i["page"] for i in from_rules) == sorted(str(p["url"]) for p in truth)


def test_recrawl_example_revisits_until_stopped(tmp_path: Path) -> None:
    """examples/recrawl: a continuous crawl of the shop; it runs until SIGTERM, its revisits of
    the unchanging demo pages are identical-payload-digest WARC records, the status and report
    show the freshness figures; ``POST /api/stop`` ends it (exit 0)."""

    site = Site(SiteSpec(hosts=1, pages=10, crawl_delay_s=None, products=20))
    with DemoServer(site) as server:
        text = (EXAMPLE.parent / "recrawl" / "crawl.toml").read_text()
        config = tmp_path / "crawl.toml"
        config.write_text(text.replace(f":{EXAMPLE_PORT}", f":{server.port}"))
        out = tmp_path / "recrawl-output"
        log = tmp_path / "crawl.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                [sys.executable, "-m", "frontier_crawl.cli", "--config", str(config)],
                stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
            )  # fmt: skip
        stopped = False
        try:

            def unchanged() -> bool:
                path = out / "crawl.jsonl"
                return path.exists() and '"outcome":"unchanged"' in path.read_text()

            wait_until("a revisit found a page unchanged", unchanged, 60, every_s=0.1,
                       alive=proc, detail=log.read_text)  # fmt: skip
            api = Api(out)
            fresh = api.status()["freshness"]
            assert fresh["enabled"] is True and fresh["scheduled"] > 0, fresh
            assert proc.poll() is None  # nothing new to fetch, and it goes on
            api.post("/api/stop")
            stopped = True
        finally:
            if not stopped and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["freshness"]["visits"]["unchanged"] >= 1, report["freshness"]
    profiles: Counter[str] = Counter()
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                rec.content_stream().read()
                profiles[rec.rec_headers.get_header("WARC-Profile") or rec.rec_type] += 1
    assert any(p.endswith("identical-payload-digest") for p in profiles), profiles
