"""Engine overhead without a network: the real engine, frontier, parser and outputs, fed by a
NullFetcher that answers every request at once with a generated page (Scrapy's
``NullDownloadHandler`` idea). Prints pages/s, CPU ms per page and peak RSS.

    .venv/bin/python bench/engine_null.py [--pages 20000] [--hosts 50] [--warc]

No traffic at all: the null fetcher never opens a socket.
"""

from __future__ import annotations

import argparse
import random
import resource
import tempfile
import time
from pathlib import Path

from frontier_crawl.config import parse
from frontier_crawl.engine import Engine
from frontier_crawl.fetch import FetchRequest, FetchResult

FILLER = b"<p>" + b"lorem ipsum dolor sit amet " * 40 + b"</p>\n"


class NullFetcher:
    """Completes every request on the next poll with a page linking to ``links`` others."""

    def __init__(self, hosts: int, pages: int, links: int, concurrency: int) -> None:
        self._hosts = hosts
        self._pages = pages
        self._links = links
        self._concurrency = concurrency
        self._pending: list[FetchRequest] = []
        self._rnd = random.Random(1)

    @property
    def free_slots(self) -> int:
        return self._concurrency - len(self._pending)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def submit(self, req: FetchRequest) -> None:
        self._pending.append(req)

    def _page(self) -> bytes:
        rnd = self._rnd
        links = b"".join(
            b'<a href="http://h%d.bench/p/%d.html">x</a>\n'
            % (rnd.randrange(self._hosts), rnd.randrange(self._pages // self._hosts))
            for _ in range(self._links)
        )
        return b"<!DOCTYPE html><html><body>" + FILLER * 8 + links + b"</body></html>"

    def poll(self, timeout_s: float) -> list[FetchResult]:
        del timeout_s
        done, self._pending = self._pending, []
        now_wall, now = time.time(), time.monotonic()
        out = []
        for req in done:
            body = self._page()
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n"
                % len(body)
            )
            out.append(
                FetchResult(
                    request=req,
                    url=req.url,
                    status=200,
                    error=None,
                    error_detail="",
                    header_bytes=head,
                    headers=(("content-type", "text/html"), ("content-length", str(len(body)))),
                    raw_body=body,
                    body=body,
                    request_bytes=b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                    ip="127.0.0.1",
                    http_version="1.1",
                    started_at=now_wall,
                    finished=now,
                    duration_s=0.0,
                )
            )
        return out

    def close(self) -> None:
        self._pending.clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--links", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--warc", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = parse(
            {
                "crawl": {
                    "seeds": [f"http://h{i}.bench/p/0.html" for i in range(args.hosts)],
                    "output_dir": str(Path(tmp) / "out"),
                    "max_depth": 1000,
                },
                "scope": {"allow_domains": ["bench"]},
                "politeness": {"min_delay_s": 0.0, "obey_robots": False},
                "fetch": {"concurrency": args.concurrency},
                "frontier": {"seen_capacity": max(args.pages * 2, 1000)},
                "output": {"warc": args.warc, "progress_interval_s": 0.0},
            }
        )
        fetcher = NullFetcher(args.hosts, args.pages, args.links, args.concurrency)
        cpu0, t0 = time.process_time(), time.perf_counter()
        report = Engine(settings, fetcher=fetcher).run()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    pages = int(report["fetched"])
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"null-fetcher engine: {pages} pages, {args.hosts} hosts, warc={'on' if args.warc else 'off'}"
        f"\n  {pages / wall:,.0f} pages/s, {1e3 * cpu / pages:.3f} CPU ms/page, peak RSS {rss_mb:.0f} MB"
    )


if __name__ == "__main__":
    main()
