"""Scrapy side of ``crawl_vs_scrapy.py``: a spider that follows every link, no item output.

Runs in the bench's own Scrapy virtualenv (never the project's). Host names ``*.bench`` are
resolved to 127.0.0.1 by :class:`LoopbackResolver` (``TWISTED_DNS_RESOLVER``); any other name
fails to resolve, so nothing leaves the loopback interface.

    <scrapy-venv>/bin/python bench/scrapy_spider.py --seeds-file seeds.txt --concurrency 64 --per-host 2
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response
from scrapy.resolver import CachingThreadedResolver
from twisted.internet import defer
from twisted.internet.error import DNSLookupError


class LoopbackResolver(CachingThreadedResolver):
    """``*.bench`` -> 127.0.0.1; every other name is a DNS error."""

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        if name.lower().rstrip(".").endswith(".bench"):
            return defer.succeed("127.0.0.1")
        return defer.fail(DNSLookupError(f"{name}: the benchmark resolves *.bench only"))


class FollowAll(scrapy.Spider):
    name = "bench"
    allowed_domains = ["bench"]  # noqa: RUF012 (Scrapy's own class attribute)

    def __init__(self, seeds: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = seeds

    async def start(self) -> AsyncIterator[scrapy.Request]:
        """The seeds, deduplicated like every other request (Scrapy's default skips the filter)."""
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse)

    def start_requests(self) -> Iterator[scrapy.Request]:  # Scrapy < 2.13
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response) -> Iterator[scrapy.Request]:
        yield from response.follow_all(response.css("a::attr(href)").getall(), callback=self.parse)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds-file", required=True)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--per-host", type=int, default=2)
    args = ap.parse_args()
    with open(args.seeds_file) as f:
        seeds = [line.strip() for line in f if line.strip()]
    process = CrawlerProcess(
        settings={
            "CONCURRENT_REQUESTS": args.concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": args.per_host,
            "DOWNLOAD_DELAY": 0,
            "AUTOTHROTTLE_ENABLED": False,
            "ROBOTSTXT_OBEY": True,
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
            "COOKIES_ENABLED": False,
            "DEPTH_LIMIT": 0,
            "TWISTED_DNS_RESOLVER": f"{Path(__file__).stem}.LoopbackResolver",
        }
    )
    process.crawl(FollowAll, seeds=seeds)
    process.start()


if __name__ == "__main__":
    main()
