"""Micro-benchmark: what ``SpiderHost.run`` costs per page, on a 20 KB page with 20 links.

    .venv/bin/python bench/spider_overhead.py [--pages 20000] [--repeats 5]

Cases (each timed over ``--pages`` calls of ``run``, median of ``--repeats``, in us of CPU per
page: ``time.process_time``, so the other processes of a shared machine do not count):

- ``default``: the default ``Spider`` (what ``[[extract]]`` rules alone, or a spider that only
  adds callbacks elsewhere, run on a seed-level page): follow every link, no items.
- ``same-as-default``: a user spider whose ``parse`` is a generator doing what the default does,
  ``yield Request(url)`` for each link (the issue's "callbacks that do what the default does").
- ``callback+meta``: ``yield Request(url, callback="parse_page", meta={"from": response.url})``
  for each link (two levels, meta encoded per request).
- ``item+css``: one item from ``response.css("title")`` (parses the page) plus the 20 requests,
  through one pipeline that returns the item.

The page parse the engine does anyway (links, lexbor) is not part of any case: the host gets the
links in ``Page.links``. For scale, the bare loop's cost per page is about 170 us.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from frontier_crawl.spider import Page, Spider, SpiderHost
from frontier_crawl.spider.load import Pipeline, import_source

SPIDERS = """
from frontier_crawl import Request, Spider


class SameAsDefault(Spider):
    def parse(self, response):
        for url in response.links:
            yield Request(url)


class CallbackMeta(Spider):
    def parse(self, response):
        for url in response.links:
            yield Request(url, callback="parse_page", meta={"from": response.url})

    def parse_page(self, response):
        return None


class ItemCss(Spider):
    def parse(self, response):
        yield {"url": response.url, "title": response.css("title")[0].text()}
        for url in response.links:
            yield Request(url)


class Keep:
    def process_item(self, item, response):
        return item
"""


def page() -> Page:
    links = [f"http://bench.test/section/{i}/page-{i * 7}.html" for i in range(20)]
    anchors = "".join(f'<li><a href="{u}">link {i}</a></li>' for i, u in enumerate(links))
    filler = "<p>" + "lorem ipsum dolor sit amet " * 30 + "</p>"
    body = (
        f"<html><head><title>Bench page</title></head><body><ul>{anchors}</ul>"
        f"{filler * 25}</body></html>"
    ).encode()
    assert len(body) >= 20_000, len(body)
    return Page(
        url="http://bench.test/index.html",
        status=200,
        headers=(("content-type", "text/html; charset=utf-8"),),
        body=body,
        content_type="text/html",
        charset=None,
        links=links,
        depth=1,
        callback="",
        meta=b"",
    )


def time_case(host: SpiderHost, p: Page, pages: int, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(pages):
            host.run(p)
        runs.append((time.process_time() - t0) / pages * 1e6)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "bench_spiders.py")
        path.write_text(textwrap.dedent(SPIDERS))
        mod: Any = import_source(str(path), "bench")
        keep = mod.Keep()
        pipe = Pipeline("spider.pipelines[0]", "Keep", keep, keep.process_item)
        hosts = {
            "default": SpiderHost(Spider()),
            "same-as-default": SpiderHost(mod.SameAsDefault()),
            "callback+meta": SpiderHost(mod.CallbackMeta()),
            "item+css": SpiderHost(mod.ItemCss(), [pipe]),
        }
        p = page()
        for name, host in hosts.items():
            y = host.run(p)
            assert len(y.requests) == 20 and not y.problems, (name, y)
            us = time_case(
                host, p, args.pages if name != "item+css" else args.pages // 10, args.repeats
            )
            print(
                f"{name:16s} {us:8.2f} us/page  ({len(y.requests)} requests, {len(y.items)} items)"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
