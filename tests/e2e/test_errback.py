"""Request(errback=...) through the engine: a status the callback does not handle reaches the
errback as HttpError (with the response), a transfer that fails for good (a refused
connection, no retries) as DownloadError with its kind; the errback's items are written."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.quotes_site import QuotesSite

SPIDER = '''
import frontier_crawl as scrapy
from frontier_crawl.exceptions import DownloadError, HttpError


class ErrSpider(scrapy.Spider):
    start_urls = ["http://quotes.test:{port}/page/1/"]

    def parse(self, response):
        yield response.follow("/nowhere/", callback=self.parse_page, errback=self.failed,
                              cb_kwargs={{"why": "missing"}})
        yield scrapy.Request("http://dead.test:{dead}/", callback="parse_page",
                             errback="failed", cb_kwargs={{"why": "dead"}})

    def parse_page(self, response, why):
        yield {{"unexpected": response.url}}

    def failed(self, failure):
        item = {{"url": failure.request.url, "why": failure.request.cb_kwargs["why"]}}
        if failure.check(HttpError):
            item["status"] = failure.value.response.status
        elif failure.check(DownloadError):
            item["kind"] = failure.value.kind
        yield item
'''


@pytest.mark.timeout(90)
def test_errbacks_get_http_and_download_errors(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with QuotesSite() as site:
        port = site.port
        (tmp_path / "spider.py").write_text(SPIDER.format(port=port, dead=dead))
        (tmp_path / "crawl.toml").write_text(f"""
[crawl]
output_dir = "out"
[scope]
allow_domains = ["quotes.test", "dead.test"]
[politeness]
min_delay_s = 0.01
obey_robots = false  # dead.test has no robots.txt to fetch: its URL must reach the connect
[fetch]
resolve = ["quotes.test:{port}:127.0.0.1", "dead.test:{dead}:127.0.0.1"]
allow_addresses = ["loopback"]
retries = 0
connect_timeout_s = 2
[output]
progress_interval_s = 0
[spider]
source = "spider.py"
""")
        proc = subprocess.run(
            [sys.executable, "-m", "frontier_crawl.cli", "--config", str(tmp_path / "crawl.toml")],
            capture_output=True, text=True, timeout=80, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    items = [json.loads(x) for x in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    assert sorted(items, key=lambda i: i["why"]) == [
        {"url": f"http://dead.test:{dead}/", "why": "dead", "kind": "connect-error"},
        {"url": f"http://quotes.test:{port}/nowhere/", "why": "missing", "status": 404},
    ]
