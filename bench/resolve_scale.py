"""``fetch.resolve`` at scale: a fetcher's start and its CPU per page with a list of 2,000,
100,000 and 1,000,000 entries, of which the site's hosts are the first 2,000.

    .venv/bin/python bench/resolve_scale.py [--hosts 2000] [--pages 4000] [--rounds 5]

The bench's static site from nginx on loopback, ``--pages`` pages over ``--hosts`` hosts, host
by host interleaved (so most transfers open a connection), 64 at once. Each round builds a
fetcher per list size (its construction's CPU is the start column) and fetches every page; the
median of the rounds is printed. A cost per transfer that grew with the list would show in the
second column; one per start, in the first.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from nginx_server import Nginx, ensure_nginx, free_port
from static_site import build_site, host_name, page_path

from frontier_crawl.fetch import Fetcher, FetchRequest


def run(urls: list[str], entries: tuple[str, ...]) -> tuple[float, float]:
    """(CPU s to build the fetcher, CPU us per page to fetch ``urls``)."""
    t0 = time.process_time()
    fetcher = Fetcher(concurrency=64, resolve=entries, capture_requests=False)
    start = time.process_time() - t0
    todo, done = list(reversed(urls)), 0
    c0 = time.process_time()
    with fetcher:
        while done < len(urls):
            while todo and fetcher.free_slots:
                fetcher.submit(FetchRequest(todo.pop()))
            done += len(fetcher.poll(1.0))
    return start, (time.process_time() - c0) / len(urls) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--pages", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fc-resolve-") as tmp:
        work, port = Path(tmp), free_port()
        site = build_site(work / "site", port, args.hosts, args.pages)
        by_host = [
            [f"http://{host_name(h)}:{port}{page_path(k)}" for k in range(n)]
            for h, n in enumerate(site.pages_per_host)
        ]
        urls = [u for k in range(max(map(len, by_host))) for us in by_host
                if k < len(us) for u in us[k : k + 1]][: args.pages]  # fmt: skip
        real = tuple(f"{host_name(h)}:{port}:127.0.0.1" for h in range(args.hosts))
        sizes = (len(real), 100_000, 1_000_000)
        lists = {n: real + tuple(f"x{i}.dummy:{port}:127.0.0.1" for i in range(n - len(real)))
                 for n in sizes}  # fmt: skip
        nginx = Nginx(work, work / "site", port)
        nginx.start(ensure_nginx())
        samples: dict[int, list[tuple[float, float]]] = {n: [] for n in sizes}
        try:
            for _ in range(args.rounds):
                for n in sizes:
                    samples[n].append(run(urls, lists[n]))
        finally:
            nginx.stop()
    for n, got in samples.items():
        start = statistics.median(s for s, _ in got) * 1000
        page = statistics.median(p for _, p in got)
        print(f"{n:>9,} entries: Fetcher() {start:.0f} ms CPU, {page:.1f} CPU us/page "
              f"({' '.join(f'{p:.0f}' for _, p in got)})")  # fmt: skip


if __name__ == "__main__":
    main()
