"""Poison inputs (issue 34): one response a parser cannot read is that URL's outcome, never
the end of the crawl. A real sitemap with ``<lastmod>0000-01-01</lastmod>`` over a real HTTP
server, crawled by the frontier-crawl command, stopped and resumed; and the engine's boundary
(``engine/poison.py``) shown with parsers that raise on one page and one sitemap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.engine import Engine
from frontier_crawl.engine import sitemaps as engine_sitemaps
from frontier_crawl.parse import LinkParser, PageLinks
from frontier_crawl.parse.sitemap import Sitemap, SitemapLimits, parse_sitemap
from tests.scripted_server import NOT_FOUND, Answer, ScriptedServer, crawl_settings, page
from tests.waiting import wait_until

HOST = "p.test"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
XML = (("Content-Type", "application/xml"),)
TEXT = (("Content-Type", "text/plain"),)
PAGES = [f"/s/{i}" for i in range(8)]


def lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "crawl.jsonl").read_text().splitlines()]


def by_path(out: Path) -> dict[str, dict[str, Any]]:
    """The last crawl-log line of each path (robots.txt lines left out)."""
    return {"/" + x["url"].split("/", 3)[3]: x for x in lines(out) if x["outcome"] != "robots-txt"}


def year_zero_sitemap(base: str) -> bytes:
    """The sitemap of the issue: one entry's lastmod is year 0 (no date Python has)."""
    entries = "".join(
        f"<url><loc>{base}{path}</loc><lastmod>{'0000-01-01' if i == 2 else '2024-03-01'}"
        "</lastmod></url>\n"
        for i, path in enumerate(PAGES)
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>\n{entries}</urlset>\n'.encode()


@pytest.mark.timeout(120)
def test_year_zero_lastmod_neither_ends_the_crawl_nor_its_resume(tmp_path: Path) -> None:
    """Before the fix: ``ValueError: year 0 is out of range`` out of the sitemap parser, exit
    1, and the resume died on the same sitemap. Now: the entry's lastmod is ignored, every
    listed page is fetched; the crawl is stopped (SIGTERM to its group) while the pages behind
    the sitemap are still being fetched, and the same command finishes it."""

    def answer(host: str, path: str, _nth: int) -> Answer:
        if path == "/robots.txt":
            return Answer(200, f"Sitemap: {base}/sitemap.xml\n".encode(), TEXT)
        if path == "/sitemap.xml":
            return Answer(200, year_zero_sitemap(base), XML)
        if path == "/":
            return page(f"{base}/linked")
        if path in PAGES or path == "/linked":
            return Answer(200, b"<html>a page</html>", delay_s=0.3)  # a stop finds it busy
        return NOT_FOUND

    with ScriptedServer(answer) as srv:
        base = srv.url(HOST, "")
        cfg = tmp_path / "crawl.toml"
        cfg.write_text(f"""
[crawl]
seeds = ["{base}/"]
output_dir = "out"
[sitemaps]
enabled = true
paths = []
[politeness]
min_delay_s = 0.01
[fetch]
resolve = {json.dumps(srv.resolve(HOST))}
allow_addresses = ["loopback"]
[frontier]
seen_capacity = 10000
[recrawl]
enabled = false
[output]
progress_interval_s = 0
""")
        command = [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)]
        first = subprocess.Popen(command, cwd=tmp_path, start_new_session=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            wait_until("the sitemap's first page requested",
                       lambda: any(e.path in PAGES for e in srv.log()), 60,
                       alive=first)  # fmt: skip
            os.killpg(first.pid, signal.SIGTERM)
            output = first.communicate(timeout=60)[0].decode()
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait()
        assert first.returncode == 0, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        second = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                                timeout=90)  # fmt: skip
        log = srv.log()
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Traceback" not in second.stderr, second.stderr[-3000:]
    got = by_path(tmp_path / "out")
    assert got["/sitemap.xml"]["outcome"] == "sitemap"
    for path in [*PAGES, "/linked", "/"]:
        assert got[path]["outcome"] == "fetched", (path, got.get(path))
    served = [e.path for e in log if e.path in PAGES]
    assert sorted(set(served)) == sorted(PAGES)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["complete"] is True


class OneBadPage:
    """The link parser, but it raises on one URL (as a parser defect on hostile input would)."""

    def __init__(self, bad: str) -> None:
        self._bad = bad
        self._real = LinkParser()

    def parse(self, url: str, content_type: str, body: bytes) -> PageLinks:
        if url == self._bad:
            raise RuntimeError("the parser met a page it cannot read")
        return self._real.parse(url, content_type, body)


@pytest.mark.timeout(60)
def test_a_parser_that_raises_is_one_urls_parse_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HTML page and a sitemap whose parsers raise: each is outcome ``parse-error`` with
    the exception in its crawl-log line, nothing of it is followed, and every other page
    (before and after it, on the same host) is fetched; the crawl ends complete."""

    def bad_sitemap(body: bytes, limits: SitemapLimits, *, truncated: bool = False) -> Sitemap:
        if b"/boom/" in body:
            raise ValueError("year 0 is out of range")
        return parse_sitemap(body, limits, truncated=truncated)

    monkeypatch.setattr(engine_sitemaps, "parse_sitemap", bad_sitemap)

    def answer(host: str, path: str, _nth: int) -> Answer:
        if path == "/robots.txt":
            sitemaps = f"Sitemap: {base}/good.xml\nSitemap: {base}/bad.xml\n"
            return Answer(200, sitemaps.encode(), TEXT)
        if path in ("/good.xml", "/bad.xml"):
            where = "ok" if path == "/good.xml" else "boom"
            entries = "".join(f"<url><loc>{base}/{where}/{i}</loc></url>" for i in range(3))
            return Answer(200, f"<urlset {NS}>{entries}</urlset>".encode(), XML)
        if path == "/":
            return page(f"{base}/a", f"{base}/poison", f"{base}/b")
        if path == "/poison":
            return page(f"{base}/behind-poison")
        return page()

    with ScriptedServer(answer) as srv:
        base = srv.url(HOST, "")
        settings = crawl_settings(tmp_path, [f"{base}/"], srv.resolve(HOST),
                                  sitemaps={"enabled": True, "paths": []})  # fmt: skip
        report = Engine(settings, parser=OneBadPage(f"{base}/poison")).run()
        served = {e.path for e in srv.log()}
    got = by_path(tmp_path / "out")
    poison, sitemap = got["/poison"], got["/bad.xml"]
    assert poison["outcome"] == "parse-error" and poison["error"] == "RuntimeError"
    assert poison["message"].startswith("RuntimeError: the parser met a page it cannot read (at ")
    assert sitemap["outcome"] == "parse-error" and sitemap["error"] == "ValueError"
    assert "year 0 is out of range" in sitemap["message"]
    assert "/behind-poison" not in served and not any(p.startswith("/boom/") for p in served)
    for path in ["/", "/a", "/b", "/good.xml", "/ok/0", "/ok/1", "/ok/2"]:
        assert got[path]["outcome"] in ("fetched", "sitemap"), (path, got[path])
        assert "message" not in got[path]
    assert report["complete"] is True
    assert report["outcomes"]["parse-error"] == 2
