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
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class ValidatorSite:
    """A loopback server whose ``/bad`` sends an ETag and a Last-Modified with bytes >= 0x80
    (ISO-8859-1 on the wire, as http.server writes headers), and ``/good`` ASCII ones; every
    request's headers are logged. When ``/bad`` has been asked ``stop_after`` times, ``stop``
    is called."""

    def __init__(self, stop_after: int) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.stop_after = stop_after
        self.stop: Callable[[], None] = lambda: None
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                with lock:
                    site.requests.append((self.path, headers))
                    bad = sum(1 for p, _ in site.requests if p == "/bad")
                if self.path == "/robots.txt":
                    status, body, extra = 404, b"", []
                elif self.path == "/":
                    status, body, extra = 200, b'<a href="/bad">b</a><a href="/good">g</a>', []
                elif self.path == "/bad":
                    status, body = 200, b"<p>bad validators</p>"
                    extra = [("ETag", '"caf\xe9"'),
                             ("Last-Modified", "Fri, 01 Mar 2024 10:30:15 GMT \xff")]  # fmt: skip
                else:
                    status, body = 200, b"<p>good validators</p>"
                    extra = [("ETag", '"good"'), ("Last-Modified", "Fri, 01 Mar 2024 10:30:15 GMT")]
                    if headers.get("if-none-match") == '"good"':
                        status, body = 304, b""
                self.send_response(status)
                for name, value in [("Content-Type", "text/html"), *extra]:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if self.path == "/bad" and bad >= site.stop_after:
                    site.stop()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> ValidatorSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.mark.timeout(90)
def test_validators_that_are_not_ascii_are_not_sent_back(tmp_path: Path) -> None:
    """Issue 34 point 3: an ETag or Last-Modified with a byte >= 0x80 was stored and sent back
    on the revisit; libcurl's header list refused it, the revisit failed locally as
    other-error with no message, and the page was never fetched again. Now such validators
    are not kept: the page's revisits are unconditional and fetched (``unchanged``), while
    the page with ASCII validators is revisited conditionally (304, ``not-modified``)."""
    with ValidatorSite(stop_after=3) as site:
        settings = crawl_settings(
            tmp_path, [f"http://{HOST}:{site.port}/"], [f"{HOST}:{site.port}:127.0.0.1"],
            recrawl={"enabled": True, "min_interval_s": 0.3, "initial_interval_s": 0.3,
                     "max_interval_s": 0.6},
        )  # fmt: skip
        engine = Engine(settings)
        site.stop = engine.request_stop
        deadline = threading.Timer(30, engine.request_stop)  # (if /bad is never asked again)
        deadline.start()
        try:
            engine.run()
        finally:
            deadline.cancel()
        requests = list(site.requests)
    bad = [headers for path, headers in requests if path == "/bad"]
    good = [headers for path, headers in requests if path == "/good"]
    assert len(bad) >= 3
    assert not any("if-none-match" in h or "if-modified-since" in h for h in bad), bad
    assert any(h.get("if-none-match") == '"good"' for h in good[1:]), good
    visits = [x for x in lines(tmp_path / "out") if x["url"].endswith("/bad")]
    assert [x["outcome"] for x in visits[:3]] == ["fetched", "unchanged", "unchanged"], visits
    assert all(x["status"] == 200 for x in visits)


def test_a_header_libcurl_cannot_take_is_a_failure_with_a_message(tmp_path: Path) -> None:
    """A request header that is not ASCII (a spider's Request(headers=...), or validators a
    crawl stored before they were refused) fails that request as other-error, and the crawl
    log says why."""
    src = tmp_path / "spider.py"
    src.write_text(
        "from frontier_crawl import Request, Spider\n"
        "class S(Spider):\n"
        "    def parse(self, response):\n"
        "        if response.url.endswith('/'):\n"
        "            yield Request(response.urljoin('/latin'), headers={'X-Name': 'caf\\xe9'})\n"
        "            yield Request(response.urljoin('/plain'))\n"
    )
    with ScriptedServer(lambda h, p, n: page()) as srv:
        settings = crawl_settings(tmp_path, [srv.url(HOST, "/")], srv.resolve(HOST),
                                  spider={"source": str(src), "class": "S"})  # fmt: skip
        report = Engine(settings).run()
        served = {e.path for e in srv.log()}
    got = by_path(tmp_path / "out")
    assert got["/latin"]["outcome"] == "failed" and got["/latin"]["error"] == "other-error"
    assert "X-Name" in got["/latin"]["message"] and "not ASCII" in got["/latin"]["message"]
    assert got["/plain"]["outcome"] == "fetched" and "/latin" not in served
    assert report["complete"] is True
