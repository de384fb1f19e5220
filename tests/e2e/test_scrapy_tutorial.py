"""A spider and pipeline written for Scrapy (its tutorial's quotes spider, and the idioms of its
most used API) run through the command line with only their imports changed, on a
quotes.toscrape.com-like site (pages over 20 KB): start_urls with no seed in crawl.toml,
custom_settings, allowed_domains, css with ::text/::attr, follow/follow_all, cb_kwargs, meta,
headers, xpath, json(), case-insensitive headers, self.logger, a from_crawler pipeline with
open_spider/close_spider, DropItem counted per pipeline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.quotes_site import AUTHORS, PAGES, QuotesSite, quotes

SPIDER = '''
import frontier_crawl as scrapy


class QuotesSpider(scrapy.Spider):
    name = "quotes"
    allowed_domains = ["quotes.test"]
    start_urls = ["http://quotes.test:{port}/page/1/"]
    custom_settings = {{"DOWNLOAD_DELAY": 0.01, "ROBOTSTXT_OBEY": True, "DEPTH_LIMIT": 0,
                       "CONCURRENT_REQUESTS_PER_DOMAIN": 1}}

    def parse(self, response, previous=None):
        self.logger.info("quotes page %s", response.url)
        for quote in response.css("div.quote"):
            yield {{
                "kind": "quote",
                "text": quote.css("span.text::text").get(),
                "author": quote.css("small.author::text").get(),
                "tags": quote.css("div.tags a.tag::text").getall(),
                "keywords": quote.css("meta.keywords::attr(content)").extract_first(),
                "number": quote.css("span.text::text").re_first(r"number (\\d+)"),
                "page": response.url,
                "previous": previous,
            }}
        author_page_links = response.css(".author + a")
        yield from response.follow_all(author_page_links, self.parse_author)
        next_page = response.css("li.next a::attr(href)").get()
        if next_page is not None:
            yield response.follow(next_page, callback=self.parse,
                                  cb_kwargs={{"previous": response.url}})
        n = response.url.rstrip("/").rsplit("/", 1)[-1]
        yield scrapy.Request(response.urljoin(f"/api/quotes?page={{n}}"), callback="parse_api",
                             meta={{"from": response.url}},
                             headers={{"Accept": "application/json"}}, priority=1)

    def parse_author(self, response):
        def extract_with_css(query):
            return response.css(query).get(default="").strip()

        yield {{
            "kind": "author",
            "name": extract_with_css("h3.author-title::text"),
            "birthdate": extract_with_css(".author-born-date::text"),
            "bio": extract_with_css(".author-description::text"),
            "xpath_name": response.xpath("//h3[@class='author-title']/text()").get().strip(),
            "site": response.headers.get("x-SITE"),
        }}

    def parse_api(self, response):
        data = response.json()
        yield {{"kind": "api", "count": len(data["quotes"]), "accept": data["accept"],
               "from": response.meta["from"], "ctype": response.headers["Content-Type"]}}
'''

PIPELINES = '''
import json

from frontier_crawl.exceptions import DropItem


class TagFilterPipeline:
    def __init__(self, delay):
        self.delay = delay
        self.kept = 0

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getfloat("DOWNLOAD_DELAY"))

    def open_spider(self, spider):
        self.spider_name = spider.name

    def process_item(self, item, spider):
        if item["kind"] == "quote" and "drop" in item["tags"]:
            raise DropItem(f"tagged drop: {{item['text']}}")
        if item["kind"] == "api" and item["count"] == 0:
            return None
        item["pipeline"] = f"{{self.spider_name}}@{{self.delay}}"
        self.kept += 1
        return item

    def close_spider(self, spider):
        with open({stats!r}, "w") as f:
            json.dump({{"kept": self.kept, "spider": spider.name}}, f)
'''


@pytest.mark.timeout(90)
@pytest.mark.parametrize("processes", [1, 2])
def test_scrapy_tutorial_spider_runs_unchanged_but_for_imports(
    tmp_path: Path, processes: int
) -> None:
    with QuotesSite() as site:
        port = site.port
        (tmp_path / "quotes_spider.py").write_text(SPIDER.format(port=port))
        stats = tmp_path / "pipeline-stats.json"
        (tmp_path / "pipelines.py").write_text(PIPELINES.format(stats=str(stats)))
        (tmp_path / "crawl.toml").write_text(f"""
[crawl]
output_dir = "out"
[fetch]
resolve = ["quotes.test:{port}:127.0.0.1"]
allow_addresses = ["loopback"]
[workers]
processes = {processes}
[output]
progress_interval_s = 0
[spider]
source = "quotes_spider.py"
pipelines = ["pipelines.py:TagFilterPipeline"]
""")
        proc = subprocess.run(
            [sys.executable, "-m", "frontier_crawl.cli", "--config", str(tmp_path / "crawl.toml")],
            capture_output=True, text=True, timeout=80, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    base = f"http://quotes.test:{port}"
    feeds = sorted((tmp_path / "out").glob("**/items.jsonl"))
    assert len(feeds) == processes  # one per worker
    items = [json.loads(x) for feed in feeds for x in feed.read_text().splitlines()]
    by_kind: dict[str, list[dict[str, object]]] = {}
    for item in items:
        by_kind.setdefault(str(item["kind"]), []).append(item)
    want_quotes = []
    for n in range(1, PAGES + 1):
        for q in quotes(n):
            if "drop" in q["tags"]:
                continue
            want_quotes.append({
                "kind": "quote", "text": q["text"], "author": q["author"], "tags": q["tags"],
                "keywords": ",".join(q["tags"]), "number": q["text"].split()[2],
                "page": f"{base}/page/{n}/",
                "previous": f"{base}/page/{n - 1}/" if n > 1 else None,
                "pipeline": "quotes@0.01",
            })  # fmt: skip
    key = lambda i: (i["page"], i["number"])  # noqa: E731
    assert sorted(by_kind["quote"], key=key) == sorted(want_quotes, key=key)
    assert sorted(by_kind["author"], key=lambda i: str(i["name"])) == [
        {"kind": "author", "name": name, "birthdate": born, "bio": bio, "xpath_name": name,
         "site": "quotes", "pipeline": "quotes@0.01"}
        for name, born, bio in sorted(AUTHORS.values())
    ]  # fmt: skip
    assert sorted(by_kind["api"], key=lambda i: str(i["from"])) == [
        {"kind": "api", "count": 10, "accept": "application/json",
         "from": f"{base}/page/{n}/", "ctype": "application/json", "pipeline": "quotes@0.01"}
        for n in range(1, PAGES + 1)
    ]  # fmt: skip
    assert site.headers["/api/quotes?page=1"]["accept"] == "application/json"
    assert site.paths.count("/page/1/") == 1  # the start URL once, the robots.txt first
    assert site.paths[0] == "/robots.txt" and site.paths.count("/robots.txt") == 1
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    dropped = sum("drop" in q["tags"] for n in range(1, PAGES + 1) for q in quotes(n))
    assert report["spider"]["dropped"] == {"TagFilterPipeline": dropped}
    assert report["spider"]["problems"] == 0
    if processes == 1:  # (each worker has its pipeline, writing the same file)
        assert json.loads(stats.read_text()) == {"kept": len(items), "spider": "quotes"}
    logs = sorted((tmp_path / "out").glob("**/crawl.jsonl"))
    lines = [json.loads(x) for log in logs for x in log.read_text().splitlines()]
    assert not [x for x in lines if x["outcome"] not in ("fetched", "robots-txt", "http-error")]
