"""Scrapy parity, part two (issue 33): start(), requests beyond GET, cookies, selectors built
from text, spider attributes, project imports, and loud refusals of what is not there."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontier_crawl.config import ConfigError, CrawlSettings
from frontier_crawl.spider import SpiderHost
from frontier_crawl.spider.adopt import adopt
from tests.unit.spider_helpers import isolated_imports, write

pytestmark = pytest.mark.usefixtures("isolated_imports")
__all__ = ["isolated_imports"]

HEAD = "import frontier_crawl as scrapy\n"


def spider_settings(
    tmp_path: Path, body: str, extra: str = "", seeds: bool = False
) -> CrawlSettings:
    """Settings adopted from a spider written to a directory of its own."""
    tmp_path = tmp_path / f"s{len(list(tmp_path.iterdir()))}"
    tmp_path.mkdir()
    write(tmp_path, "spider.py", HEAD + body)
    lines = ["[crawl]"] + (['seeds = ["http://a.test/"]'] if seeds else [])
    lines += ["[spider]", 'source = "spider.py"', extra]
    (tmp_path / "crawl.toml").write_text("\n".join(lines) + "\n")
    from frontier_crawl.config import load

    return adopt(load(tmp_path / "crawl.toml"))


def starts(tmp_path: Path, body: str) -> list[tuple[str, str]]:
    s = spider_settings(tmp_path, body)
    host = SpiderHost.load(s)
    assert host is not None
    return [(r.url, r.callback) for r in host.start_requests()]


# -- start() ------------------------------------------------------------------------------


def test_async_start_as_in_scrapys_tutorial(tmp_path: Path) -> None:
    body = """
import asyncio

class S(scrapy.Spider):
    name = "quotes"

    async def start(self):
        urls = ["http://a.test/page/1/", "http://a.test/page/2/"]
        for url in urls:
            await asyncio.sleep(0)
            yield scrapy.Request(url=url, callback=self.parse_page)

    def parse_page(self, response):
        pass
"""
    s = spider_settings(tmp_path, body)
    assert s.crawl.seeds == ("http://a.test/page/1/", "http://a.test/page/2/")
    assert starts(tmp_path, body) == [
        ("http://a.test/page/1/", "parse_page"), ("http://a.test/page/2/", "parse_page")
    ]  # fmt: skip


def test_sync_start_and_start_requests_order(tmp_path: Path) -> None:
    sync = """
class S(scrapy.Spider):
    def start(self):
        return [scrapy.Request("http://a.test/sync")]
"""
    assert starts(tmp_path, sync) == [("http://a.test/sync", "")]
    both = """
class S(scrapy.Spider):
    async def start(self):
        yield scrapy.Request("http://a.test/start")

    def start_requests(self):
        yield scrapy.Request("http://a.test/old")
"""
    assert starts(tmp_path, both) == [("http://a.test/start", "")]  # start() wins
    chained = """
class S(scrapy.Spider):
    async def start(self):
        async for request in super().start():
            yield request
        yield scrapy.Request("http://a.test/more")

    def start_requests(self):
        yield scrapy.Request("http://a.test/old")
"""
    assert starts(tmp_path, chained) == [("http://a.test/old", ""), ("http://a.test/more", "")]
    old = """
class S(scrapy.Spider):
    start_urls = ["http://a.test/ignored"]
    def start_requests(self):
        yield scrapy.Request("http://a.test/old")
"""
    assert starts(tmp_path, old) == [("http://a.test/old", "")]


def test_bad_start_fails_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"start\(\) yielded an item"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    async def start(self):\n"
                        "        yield {'a': 1}\n")  # fmt: skip
    with pytest.raises(ConfigError, match="coroutine without yield"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    async def start(self):\n"
                        "        return [scrapy.Request('http://a.test/')]\n")  # fmt: skip
    with pytest.raises(ConfigError, match=r"start\(\) failed: KeyError"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    async def start(self):\n"
                        "        yield {}['x']\n")  # fmt: skip
    with pytest.raises(ConfigError, match="did you miss an 's'"):
        spider_settings(tmp_path, "class S(scrapy.Spider):\n    start_url = 'http://a.test/'\n")
