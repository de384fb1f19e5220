"""Per-link cost of Frontier.add, the admission path (timeit, best of interleaved rounds: the
machine is shared and noisy, so the minimum is the figure least disturbed by other load).

    .venv/bin/python bench/micro_admission.py

Cases, each one page of 20 links added inside an open batch (as the engine does):

* repeat:       links already admitted and committed (a site's navigation links, the bulk of a
                crawl's link stream), with the settled-link set (default) and without it
                (``settled_links=0``: every link is canonicalised, scoped, hashed and asked of
                the seen-set, whose recent cache confirms it with one LMDB get);
* out of scope: links to hosts outside ``allow_domains``, both ways;
* new:          links never seen (the seen-set's LMDB put, queue entry), 50 pages a commit,
                for scale;

and ``in_scope`` alone: the suffix-set walk against the former ``any(endswith)`` over the
allowed domains.
"""

from __future__ import annotations

import tempfile
import timeit
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path

from frontier_crawl.frontier import Frontier
from frontier_crawl.frontier.options import FrontierOptions
from frontier_crawl.frontier.politeness import DelayPolicy
from frontier_crawl.frontier.traps import Limits
from frontier_crawl.frontier.urls import host_of

LINKS = 20
DOMAINS = ["example.org", "example.net", "bench", "test"]


def make(state: Path, settled_links: int) -> Frontier:
    return Frontier(
        state,
        FrontierOptions(
            allow_domains=DOMAINS,
            exclude=[r"\.(jpe?g|png|gif|zip|pdf)$"],
            limits=Limits(max_depth=1000),
            max_pages=0,
            policy=DelayPolicy(min_delay_s=0.0),
            connections_per_host=2,
            obey_robots=False,
            user_agent="bench",
            robots_ttl_s=3600.0,
            robots_retry_s=10.0,
            robots_attempts=2,
            max_host_errors=3,
            memory_urls=1_000_000,
            map_size=1 << 32,
            settled_links=settled_links,
        ),
    )


def page(host: int, first: int) -> list[str]:
    return [f"http://www.h{host}.example.org/section/{first + i}/page.html" for i in range(LINKS)]


def per_link_us(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number / LINKS * 1e6


def main() -> None:
    rows: dict[str, float] = {}
    for settled in (0, 32_768):
        label = "settled set" if settled else "no settled set"
        with tempfile.TemporaryDirectory() as tmp:
            f = make(Path(tmp) / "state", settled)
            nav = page(1, 0)
            with f.batch():
                f.add(nav, depth=0)
            outside = [f"http://cdn{i}.elsewhere.com/x/{i}.js" for i in range(LINKS)]
            with f.batch():
                f.add(outside, depth=0)

            def repeat(f: Frontier = f, nav: list[str] = nav) -> None:
                with f.batch():
                    f.add(nav, depth=1)

            def out_of_scope(f: Frontier = f, outside: list[str] = outside) -> None:
                with f.batch():
                    f.add(outside, depth=1)

            fresh = count(1000)

            def new(f: Frontier = f, fresh: Iterator[int] = fresh) -> None:  # 50 pages a commit
                with f.batch():
                    for _ in range(50):
                        f.add(page(2, next(fresh) * LINKS), depth=1)

            rows[f"repeat links, {label}"] = per_link_us(repeat, 2000)
            rows[f"out-of-scope links, {label}"] = per_link_us(out_of_scope, 2000)
            rows[f"new links, {label}"] = per_link_us(new, 10) / 50
            f.close()

    with tempfile.TemporaryDirectory() as tmp:
        f = make(Path(tmp) / "state", 0)
        url = "http://www.h7.example.org/section/1/page.html"
        domains = tuple(DOMAINS)

        def in_scope_old(url: str = url) -> bool:
            host = host_of(url)
            return any(host == d or host.endswith("." + d) for d in domains)

        def in_scope_new(url: str = url, f: Frontier = f) -> bool:
            return f._domain_allowed(host_of(url))

        rows["in_scope domain check, any(endswith) (before)"] = per_link_us(
            lambda: [in_scope_old() for _ in range(LINKS)], 5000
        )
        rows["in_scope domain check, suffix set (after)"] = per_link_us(
            lambda: [in_scope_new() for _ in range(LINKS)], 5000
        )
        f.close()
    for name, us in rows.items():
        print(f"{name:50s} {us:7.2f} us/link")


if __name__ == "__main__":
    main()
