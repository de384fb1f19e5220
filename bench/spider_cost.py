"""What a spider costs the crawl: CPU per page with a spider whose callback does what the
default does (follow every link, no items) against no spider at all, 1 process, WARC off, on
the bench's static site served by nginx (pages counted from nginx's access log). The goal of
issue 11: at most 10% more CPU per page.

    .venv/bin/python bench/spider_cost.py                       # 10,000 pages, 50 hosts, 3 reps
    .venv/bin/python bench/spider_cost.py --pages 5000 --reps 5

Crawlers, run alternately, each ``--reps`` times; the ratio is of the medians:

- ``none``: no [spider] (today's path, untouched);
- ``same``: a spider whose ``parse`` is ``for url in response.links: yield Request(url)``;
- ``default``: a Spider subclass that keeps the default ``parse`` (the host's fast path).

CPU is the crawler's process tree (wait4 rusage), so it includes everything the spider adds:
the Page, the in-scope link list, the callback, the requests given back to the frontier.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from crawl_vs_scrapy import (
    Crawler,
    RunResult,
    check_log,
    median,
    print_run,
    run_one,
    write_fc_config,
)
from nginx_server import Nginx, ensure_nginx, free_port
from static_site import build_site

SAME_AS_DEFAULT = """
from frontier_crawl import Request, Spider


class SameAsDefault(Spider):
    def parse(self, response):
        for url in response.links:
            yield Request(url)
"""

DEFAULT = """
from frontier_crawl import Spider


class KeepsTheDefault(Spider):
    pass
"""


def crawler(key: str, label: str, site: object, args: argparse.Namespace, spider: str) -> Crawler:
    def command(run_dir: Path) -> list[str]:
        conf = write_fc_config(run_dir, site, args, warc=False, delay_s=0.0,  # type: ignore[arg-type]
                               per_host=args.per_host)  # fmt: skip
        if spider:
            (run_dir / "bench_spider.py").write_text(spider)
            conf.write_text(conf.read_text() + '\n[spider]\nsource = "bench_spider.py"\n')
        return [sys.executable, "-m", "frontier_crawl.cli", "--config", str(conf)]

    return Crawler(key, label, command)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--fanout", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--per-host", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    nginx_bin = ensure_nginx()
    work = Path(tempfile.mkdtemp(prefix="fc-spider-cost-"))
    nginx: Nginx | None = None
    try:
        port = free_port()
        site = build_site(work / "site", port, args.hosts, args.pages, args.fanout, (10, 30))
        nginx = Nginx(work, work / "site", port, 1)
        nginx.start(nginx_bin)
        print(f"site: {args.pages:,} pages on {args.hosts} hosts; nginx on 127.0.0.1:{port}; "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        crawlers = [
            crawler("none", "no spider", site, args, ""),
            crawler("same", "spider, parse = follow every link", site, args, SAME_AS_DEFAULT),
            crawler("default", "spider, default parse", site, args, DEFAULT),
        ]
        results: list[RunResult] = []
        for rep in range(args.reps):
            for c in crawlers:
                res = run_one(c, rep, work, nginx, args.timeout)
                check_log(res, site)
                print_run(res)
                results.append(res)
        cpu = {c.key: median([r.cpu_ms_per_page for r in results if r.crawler.key == c.key
                              and r.pages]) for c in crawlers}  # fmt: skip
        print(f"\nmedians of {args.reps} (CPU ms per page, crawler process tree, WARC off):")
        for c in crawlers:
            print(f"  {c.label:<36} {cpu[c.key]:7.3f} ms  {cpu[c.key] / cpu['none']:.3f}x")
        print(f"spider cost (same-as-default / none): {100 * (cpu['same'] / cpu['none'] - 1):+.1f}% "
              "CPU per page (goal: at most +10%)")  # fmt: skip
    finally:
        if nginx is not None:
            nginx.stop()
        shutil.rmtree(work, ignore_errors=True)
        time.sleep(0)


if __name__ == "__main__":
    main()
