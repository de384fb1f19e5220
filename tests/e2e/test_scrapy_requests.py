"""Requests beyond GET through the command line (issue 33): FormRequest, JsonRequest and
Request(method=, body=) are sent with their method and body, deduplicated by URL, method and
body (a GET of the same URL is another request), a POST answered 503 is not sent again, a
303 after a POST is followed with a GET; the WARC request records carry the method and the
body, the crawl log the method."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.quotes_site import QuotesSite

SPIDER = '''
import frontier_crawl as scrapy


class PostSpider(scrapy.Spider):
    start_urls = ["http://quotes.test:{port}/page/1/"]

    def parse(self, response):
        echo = response.urljoin("/echo")
        for n in (1, 2, 1):  # the third is the first again: one request
            yield scrapy.FormRequest(echo, formdata={{"n": str(n)}}, callback=self.echo)
        yield scrapy.Request(echo, callback=self.echo)  # a GET of the same URL
        yield scrapy.JsonRequest(echo, data={{"b": [1, 2], "a": "x"}}, callback=self.echo)
        yield scrapy.Request(echo, method="PUT", body="put body", callback=self.echo)
        yield scrapy.FormRequest(response.urljoin("/flaky"), formdata={{"a": "1"}},
                                 callback=self.echo)
        yield scrapy.FormRequest(response.urljoin("/see-other"), formdata={{"a": "1"}},
                                 callback=self.echo)

    def echo(self, response):
        yield {{"url": response.url, **response.json()}}
'''


@pytest.mark.timeout(90)
def test_post_put_json_requests(tmp_path: Path) -> None:
    with QuotesSite() as site:
        port = site.port
        (tmp_path / "spider.py").write_text(SPIDER.format(port=port))
        (tmp_path / "crawl.toml").write_text(f"""
[crawl]
output_dir = "out"
[politeness]
min_delay_s = 0.01
[fetch]
resolve = ["quotes.test:{port}:127.0.0.1"]
allow_addresses = ["loopback"]
retries = 2
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
    base = f"http://quotes.test:{port}"
    items = [json.loads(x) for x in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    got = sorted((i["method"], i["url"], i["body"]) for i in items)
    assert got == sorted([
        ("POST", f"{base}/echo", "n=1"), ("POST", f"{base}/echo", "n=2"),
        ("GET", f"{base}/echo", ""), ("POST", f"{base}/echo", '{"a": "x", "b": [1, 2]}'),
        ("PUT", f"{base}/echo", "put body"), ("GET", f"{base}/echo?after=303", ""),
    ])  # fmt: skip
    sent = [(m, p, b) for m, p, b, _ in site.requests if p.startswith(("/echo", "/flaky"))]
    assert sent.count(("POST", "/echo", b"n=1")) == 1
    assert sent.count(("POST", "/flaky", b"a=1")) == 1  # a 503 to a POST: not sent again
    form = next(h for _, _, b, h in site.requests if b == b"n=2")
    assert form["content-type"] == "application/x-www-form-urlencoded"
    assert "expect" not in form
    json_headers = next(h for _, _, b, h in site.requests if b.startswith(b"{"))
    assert json_headers["content-type"] == "application/json"
    lines = [json.loads(x) for x in (tmp_path / "out" / "crawl.jsonl").read_text().splitlines()]
    methods = sorted(x.get("method", "GET") for x in lines if "/echo" in x["url"]
                     or "/flaky" in x["url"] or "/see-other" in x["url"])  # fmt: skip
    assert methods == ["GET", "GET", "POST", "POST", "POST", "POST", "POST", "PUT"]
    assert all("method" not in x for x in lines if x["url"].endswith(("/page/1/", "robots.txt")))
    flaky = [x for x in lines if x["url"].endswith("/flaky")]
    assert [(x["status"], x["outcome"]) for x in flaky] == [(503, "http-error")]
    requests = {}
    for warc in (tmp_path / "out").glob("**/*.warc.gz"):
        with warc.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "request":
                    method = record.http_headers.protocol  # (warcio: the line's first word)
                    body = record.content_stream().read()
                    requests.setdefault(method, []).append(
                        (record.rec_headers.get_header("WARC-Target-URI"), body))
    assert (f"{base}/echo", b"n=2") in requests["POST"], list(requests)
    assert (f"{base}/echo", b"put body") in requests["PUT"]
    assert (f"{base}/echo", b"") in requests["GET"]


BROKEN = '''
import frontier_crawl as scrapy


class Broken(scrapy.Spider):
    start_urls = ["http://quotes.test:{port}/page/1/"]

    def parse(self, response):
        yield scrapy.Request(response.urljoin("/page/2/"), callback=self.parse_page)

    def parse_page(self, response):
        raise TypeError("a callback that cannot work")
'''


@pytest.mark.timeout(90)
@pytest.mark.parametrize("broken", [True, False])
def test_a_crawl_whose_callbacks_all_failed_says_so(tmp_path: Path, broken: bool) -> None:
    with QuotesSite() as site:
        port = site.port
        source = BROKEN.format(port=port)
        if broken:  # parse fails too: every callback failed
            source = source.replace("        yield scrapy.Request(", "        1 / 0\n"
                                    "        yield scrapy.Request(")  # fmt: skip
        (tmp_path / "spider.py").write_text(source)
        (tmp_path / "crawl.toml").write_text(f"""
[crawl]
output_dir = "out"
[politeness]
min_delay_s = 0.01
[fetch]
resolve = ["quotes.test:{port}:127.0.0.1"]
allow_addresses = ["loopback"]
[output]
progress_interval_s = 0
[spider]
source = "spider.py"
""")
        proc = subprocess.run(
            [sys.executable, "-m", "frontier_crawl.cli", "--config", str(tmp_path / "crawl.toml")],
            capture_output=True, text=True, timeout=80, cwd=tmp_path,
        )  # fmt: skip
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    if broken:
        assert proc.returncode == 3, proc.stderr[-3000:]
        assert "every page given to the spider (1) failed" in proc.stderr
        assert report["spider"]["pages"] == report["spider"]["failed_pages"] == 1
    else:  # one callback worked (parse), one failed: the crawl's own status
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (report["spider"]["pages"], report["spider"]["failed_pages"]) == (2, 1)
