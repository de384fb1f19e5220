"""Before/after of the link path in one process: the link extraction of ``micro_links.py`` (and
``wide``: 3,000 pages of ``engine_null.py``'s shape, their links to its 20,000 URLs, as in the
engine's run: more hrefs than the remembered shapes' young generation holds) and
the admission of ``micro_admission.py``, run by two trees of the code in turn, round after
round, in CPU time (``time.process_time``). On a shared, loaded machine the load changes from
second to second; alternating the trees every few milliseconds puts both under the same load,
and the median of the per-round ratios is the figure to quote.

    git archive <commit> | tar -x -C DIR
    .venv/bin/python bench/ab_links.py --baseline DIR [--rounds 41]

Both trees are imported as ``frontier_crawl`` one after the other (the baseline first, its
modules then put aside): their functions keep their own modules' globals.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import micro_links  # the bench's own pages

HERE = str(Path(__file__).resolve().parent.parent)


def load(tree: str) -> dict[str, ModuleType]:
    """Import ``frontier_crawl`` (parse, frontier) from ``tree``; forget it in sys.modules."""
    for name in [m for m in sys.modules if m == "frontier_crawl" or m.startswith("frontier_crawl.")]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    try:
        mods = {
            name: importlib.import_module(f"frontier_crawl.{name}")
            for name in ("parse", "frontier", "frontier.options", "frontier.politeness",
                         "frontier.traps")
        }  # fmt: skip
        assert mods["parse"].__file__ is not None and mods["parse"].__file__.startswith(tree)
    finally:
        sys.path.remove(tree)
    for name in [m for m in sys.modules if m == "frontier_crawl" or m.startswith("frontier_crawl.")]:
        del sys.modules[name]
    return mods


def frontier(mods: dict[str, ModuleType], state: Path, settled_links: int) -> Any:
    options = mods["frontier.options"].FrontierOptions(
        allow_domains=["example.org", "bench"],
        exclude=[r"\.(jpe?g|png|gif|zip|pdf)$"],
        limits=mods["frontier.traps"].Limits(max_depth=1000),
        max_pages=0,
        policy=mods["frontier.politeness"].DelayPolicy(min_delay_s=0.0),
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
    )
    return mods["frontier"].Frontier(state, options)


def cases(mods: dict[str, ModuleType], tmp: Path) -> dict[str, tuple[Callable[[], object], int]]:
    """name -> (one round's work, units it covers: pages or links)."""
    extract = mods["parse"].extract_links
    mixed = micro_links.mixed_page()
    url, ctype = "http://example.com/dir/page.html", "text/html; charset=utf-8"
    nulls, wide, sites = PAGES["null"], PAGES["wide"], PAGES["site"]
    site_urls = [f"http://www.site.test/area/{n % 7}/page-{n}.html" for n in range(len(sites))]

    def run_mixed() -> None:
        for _ in range(20):
            extract(mixed, url, ctype)

    def run_null() -> None:
        for i, body in enumerate(nulls):
            extract(body, f"http://h{i % 50}.bench/p/{i}.html", "text/html")

    def run_wide() -> None:
        for i, body in enumerate(wide):
            extract(body, f"http://h{i % 50}.bench/p/{i}.html", "text/html")

    def run_site() -> None:
        for body, page_url in zip(sites, site_urls, strict=True):
            extract(body, page_url, "text/html; charset=utf-8")

    out: dict[str, tuple[Callable[[], object], int]] = {
        "extract_links mixed (us/page)": (run_mixed, 20),
        "extract_links null (us/page)": (run_null, len(nulls)),
        "extract_links wide (us/page)": (run_wide, len(wide)),
        "extract_links site (us/page)": (run_site, len(sites)),
    }
    links = [[u for u in extract(b, f"http://h{i % 50}.bench/p/{i}.html", "text/html").links]
             for i, b in enumerate(nulls)]  # fmt: skip
    for settled in (0, 32_768):
        f = frontier(mods, tmp / f"{id(mods)}-{settled}", settled)
        with f.batch():
            for page in links:
                f.add(page, depth=0)

        def repeat(f: Any = f) -> None:
            with f.batch():
                for page in links[:100]:
                    f.add(page, depth=1)

        label = "settled set" if settled else "no settled set"
        out[f"admit repeat links, {label} (us/link)"] = (repeat, sum(map(len, links[:100])))
        FRONTIERS.append(f)
    return out


PAGES: dict[str, list[bytes]] = {}
FRONTIERS: list[Any] = []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="a tree of the code (git archive)")
    ap.add_argument("--rounds", type=int, default=41)
    args = ap.parse_args()
    PAGES["null"] = [micro_links.null_page() for _ in range(400)]
    PAGES["wide"] = [micro_links.null_page() for _ in range(3000)]
    PAGES["site"] = [micro_links.site_page(n) for n in range(400)]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": load(str(Path(args.baseline).resolve())), "after": load(HERE)}
        work = {name: cases(mods, Path(tmp)) for name, mods in trees.items()}
        samples: dict[str, dict[str, list[float]]] = {t: {c: [] for c in work[t]} for t in work}
        for r in range(args.rounds):
            order = list(work) if r % 2 == 0 else list(reversed(work))
            for case in work["before"]:
                for tree in order:
                    fn, units = work[tree][case]
                    start = time.process_time()
                    fn()
                    samples[tree][case].append((time.process_time() - start) / units * 1e6)
        for f in FRONTIERS:
            f.close()
    print(f"CPU per unit, median of {args.rounds} alternated rounds; ratio: median of per-round")
    for case in work["before"]:
        b, a = samples["before"][case], samples["after"][case]
        ratio = statistics.median(x / y for x, y in zip(a, b, strict=True) if y > 0)
        print(f"{case:44s} before {statistics.median(b):8.2f}  after {statistics.median(a):8.2f}"
              f"  after/before {ratio:5.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
