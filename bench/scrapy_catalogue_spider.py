"""Scrapy side of ``spider_vs_scrapy.py``: examples/catalogue/catalogue_spider.py as a Scrapy spider.

The same two levels (index -> listings, following ``a.next`` -> products) and the same item
fields, written to a JSON Lines feed (``FEEDS``). Runs in the bench's Scrapy virtualenv; names
``*.bench`` resolve to 127.0.0.1 only (``scrapy_spider.LoopbackResolver``).

    <scrapy-venv>/bin/python bench/scrapy_catalogue_spider.py --seeds-file seeds.txt --out items.jsonl
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response


def _text(response: Response, selector: str) -> str | None:
    node = response.css(selector)
    if not node:
        return None
    return " ".join(" ".join(node[0].css("::text").getall()).split())


class Catalogue(scrapy.Spider):
    name = "catalogue"
    allowed_domains = ["bench"]  # noqa: RUF012 (Scrapy's own class attribute)

    def __init__(self, seeds: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = seeds

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse)

    def start_requests(self) -> Iterator[scrapy.Request]:  # Scrapy < 2.13
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response) -> Iterator[scrapy.Request]:
        for link in response.css("a.category"):
            category = " ".join(" ".join(link.css("::text").getall()).split())
            yield response.follow(
                link.attrib["href"], callback=self.parse_listing, meta={"category": category}
            )

    def parse_listing(self, response: Response) -> Iterator[scrapy.Request]:
        for href in response.css("li.product a.product-link::attr(href)").getall():
            yield response.follow(
                href,
                callback=self.parse_product,
                meta={"category": response.meta["category"], "listing": response.url},
            )
        following = response.css("a.next::attr(href)").get()
        if following is not None:
            yield response.follow(
                following,
                callback=self.parse_listing,
                meta={"category": response.meta["category"]},
            )

    def parse_product(self, response: Response) -> Iterator[dict[str, Any]]:
        value = response.css("span.price::attr(data-value)").get()
        yield {
            "url": response.url,
            "name": _text(response, "h1.product-name"),
            "price": None if value is None else float(value),
            "sku": _text(response, "span.sku"),
            "category": response.meta["category"],
            "listing": response.meta["listing"],
            "tags": [" ".join(t.split()) for t in response.css("ul.tags li::text").getall()],
            "description": _text(response, "div.description"),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds-file", required=True)
    ap.add_argument("--out", required=True, help="the JSON Lines feed")
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
            "TWISTED_DNS_RESOLVER": "scrapy_spider.LoopbackResolver",
            "FEEDS": {args.out: {"format": "jsonlines", "encoding": "utf8"}},
        }
    )
    process.crawl(Catalogue, seeds=seeds)
    process.start()


if __name__ == "__main__":
    main()
