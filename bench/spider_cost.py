"""What a spider costs the crawl: CPU per page with a spider whose callback does what the
default does (follow every link, no items) against no spider at all. Issue 11's goal, kept by
issue 20: the spider path within 10% of the plain path.

    .venv/bin/python bench/spider_cost.py --null                      # in one process, 21 rounds
    .venv/bin/python bench/spider_cost.py --null --baseline DIR --aa  # and against another tree
    .venv/bin/python bench/spider_cost.py                             # real crawls, nginx
    .venv/bin/python bench/spider_cost.py --pages 5000 --reps 9 --aa

Cases, run alternately (the order reversed every other round or rep):

- ``none``: no [spider] (today's path, untouched); ``none-again`` (``--aa``): the same once
  more, so the ratio none-again/none shows the noise of the figure (an A/A);
- ``same``: a spider whose ``parse`` is ``for url in response.links: yield Request(url)``;
- ``default``: a Spider subclass that keeps the default ``parse`` (the host's fast path).

The figure is the median over rounds (or reps) of the per-round ratio case/none: both runs of a
ratio ran within seconds of each other, so a change of the machine's load between rounds cancels
out of it, which a ratio of medians does not do.

``--null``: the engine on ``engine_null.py``'s null fetcher (no sockets, every request answered
at once with a page of 20 links over 50 hosts), in this process, each run timed with
``time.process_time``: the load-robust form. ``--baseline DIR`` (a ``git archive`` tree) runs
each case of that tree too, in the same rounds, and prints after/before per case (the plain
path's cost unchanged, the spider path's cut). Trees are swapped in ``sys.modules`` as
``ab_engine.py`` does.

Without ``--null``: the loopback crawl's static site and nginx, frontier-crawl with WARC off, 1
process, concurrency 64, 2 connections per host, no delay; CPU is the crawler's process
(``os.wait4``), pages are counted from nginx's log.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

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

HERE = str(Path(__file__).resolve().parent.parent)
BENCH = str(Path(__file__).resolve().parent)

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

CASES = {"none": "", "none-again": "", "same": SAME_AS_DEFAULT, "default": DEFAULT}
LABELS = {
    "none": "no spider",
    "none-again": "no spider (A/A)",
    "same": "spider, parse = follow every link",
    "default": "spider, default parse",
}


def crawler(key: str, site: object, args: argparse.Namespace, spider: str) -> Crawler:
    def command(run_dir: Path) -> list[str]:
        conf = write_fc_config(run_dir, site, args, warc=False, delay_s=0.0,  # type: ignore[arg-type]
                               per_host=args.per_host)  # fmt: skip
        if spider:
            (run_dir / "bench_spider.py").write_text(spider)
            conf.write_text(conf.read_text() + '\n[spider]\nsource = "bench_spider.py"\n')
        return [sys.executable, "-m", "frontier_crawl.cli", "--config", str(conf)]

    return Crawler(key, LABELS[key], command)


def ratios(samples: dict[str, list[float]], of: str, to: str) -> list[float]:
    return [a / b for a, b in zip(samples[of], samples[to], strict=True)]


def report(samples: dict[str, list[float]], keys: list[str], what: str, prefix: str = "") -> None:
    """Medians per case and the medians of the per-round ratios to ``none``."""
    rounds = len(samples[prefix + "none"])
    print(f"\n{what}: medians of {rounds} (CPU ms per page); ratio = median of per-round ratios")
    for key in keys:
        xs = samples[prefix + key]
        rs = ratios(samples, prefix + key, prefix + "none")
        print(f"  {LABELS[key]:<36} {statistics.median(xs):7.3f} ms  {statistics.median(rs):.3f}x"
              f"  (ratios {min(rs):.3f} to {max(rs):.3f})")  # fmt: skip
    for key in keys:
        if key != "none":
            r = statistics.median(ratios(samples, prefix + key, prefix + "none"))
            print(f"{what}: {key} / none {100 * (r - 1):+.1f}% CPU per page (goal: at most +10%)")


# -- in one process, on the null fetcher --------------------------------------------------


def _ours(name: str) -> bool:
    return name.split(".")[0] in ("frontier_crawl", "engine_null")


def _forget() -> dict[str, ModuleType]:
    mods = {name: sys.modules[name] for name in list(sys.modules) if _ours(name)}
    for name in mods:
        del sys.modules[name]
    return mods


def _install(mods: dict[str, ModuleType]) -> None:
    _forget()
    sys.modules.update(mods)


def null_runner(tree: str, pages: int, hosts: int) -> Callable[[str], float]:
    """A function running ``tree``'s engine on the null fetcher with a spider source ("":
    none), returning CPU seconds per page."""
    _forget()
    sys.path[:0] = [tree, BENCH]
    try:
        config = importlib.import_module("frontier_crawl.config")
        engine = importlib.import_module("frontier_crawl.engine")
        null = importlib.import_module("engine_null")
        assert config.__file__ is not None and config.__file__.startswith(tree)
    finally:
        del sys.path[:2]
    mods = _forget()

    def run(spider: str) -> float:
        _install(mods)
        sys.path.insert(0, tree)  # a module the engine imports late comes from this tree too
        before = set(sys.modules)
        with tempfile.TemporaryDirectory() as tmp:
            raw: dict[str, dict[str, object]] = {
                "crawl": {
                    "seeds": [f"http://h{i}.bench/p/0.html" for i in range(hosts)],
                    "output_dir": str(Path(tmp) / "out"),
                    "max_depth": 1000,
                },
                "scope": {"allow_domains": ["bench"]},
                "politeness": {"min_delay_s": 0.0, "obey_robots": False},
                "fetch": {"concurrency": 64},
                "frontier": {"seen_capacity": max(pages * 8, 1000)},
                "output": {"warc": False, "progress_interval_s": 0.0},
            }
            if spider:
                source = Path(tmp) / "bench_spider.py"
                source.write_text(spider)
                raw["spider"] = {"source": str(source)}
            settings = config.parse(raw)
            # a site of ``pages`` pages crawled to its end: no max_pages, which would stop the
            # plain path's admission at its first new link once reached, not the spider's
            fetcher = null.NullFetcher(hosts, pages, 20, 64)
            cpu0 = time.process_time()
            result = engine.Engine(settings, fetcher=fetcher).run()
            cpu = time.process_time() - cpu0
            if spider:
                sys.path.remove(tmp)  # the spider's directory (spider/load.py appended it)
        for name in set(sys.modules) - before:  # the spider's module
            if not _ours(name):
                del sys.modules[name]
        sys.path.remove(tree)
        mods.update(_forget())
        fetched = int(result["fetched"])
        assert fetched >= pages * 0.5, (tree, fetched)
        return cpu / fetched

    return run


def main_null(args: argparse.Namespace, keys: list[str]) -> None:
    trees = {"": HERE}
    if args.baseline:
        trees["base:"] = str(Path(args.baseline).resolve())
    runners = {prefix: null_runner(tree, args.pages, args.hosts) for prefix, tree in trees.items()}
    order = [(prefix, key) for prefix in trees for key in keys]
    print(f"null-fetcher engine, {args.pages} pages a run, {args.hosts} hosts, trees: "
          f"{', '.join(trees.values())}; load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    for prefix, key in order:
        runners[prefix](CASES[key])  # warm: imports done, first-run caches not counted
    samples: dict[str, list[float]] = {prefix + key: [] for prefix, key in order}
    for r in range(args.rounds):
        for prefix, key in order if r % 2 == 0 else reversed(order):
            samples[prefix + key].append(runners[prefix](CASES[key]) * 1e3)
        print(f"  round {r + 1}: " + "  ".join(f"{k} {v[-1]:.3f}" for k, v in samples.items())
              + f"  load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    report(samples, keys, "this tree")
    if args.baseline:
        report(samples, keys, "baseline", "base:")
        print(f"\nthis tree / baseline (median of per-round ratios, {args.rounds} rounds):")
        for key in keys:
            rs = ratios(samples, key, "base:" + key)
            print(f"  {LABELS[key]:<36} {statistics.median(rs):.3f}  "
                  f"(ratios {min(rs):.3f} to {max(rs):.3f})")  # fmt: skip
    print(f"load at the end {os.getloadavg()[0]:.2f}")


# -- real crawls ----------------------------------------------------------------------------


def main_crawl(args: argparse.Namespace, keys: list[str]) -> None:
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
        crawlers = [crawler(key, site, args, CASES[key]) for key in keys]
        samples: dict[str, list[float]] = {key: [] for key in keys}
        for rep in range(args.reps):
            got: dict[str, RunResult] = {}
            for c in crawlers if rep % 2 == 0 else reversed(crawlers):
                res = run_one(c, rep, work, nginx, args.timeout)
                check_log(res, site)
                print_run(res)
                got[c.key] = res
            if all(r.pages for r in got.values()):  # a rep counts whole, or not at all
                for key in keys:
                    samples[key].append(got[key].cpu_ms_per_page)
        if not samples["none"]:
            sys.exit("no rep crawled every case")
        print(f"(medians of single runs: {', '.join(f'{k} {median(v):.3f}' for k, v in samples.items())})")
        report(samples, keys, "crawls")
    finally:
        if nginx is not None:
            nginx.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--null", action="store_true", help="the null-fetcher engine, in-process")
    ap.add_argument("--baseline", help="with --null: a tree of the code (git archive) to A/B")
    ap.add_argument("--rounds", type=int, default=21, help="with --null")
    ap.add_argument("--aa", action="store_true", help="run the no-spider case twice (A/A)")
    ap.add_argument("--pages", type=int, default=None, help="10,000 (crawls), 3,000 (--null)")
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--fanout", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--per-host", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    keys = ["none", "none-again", "same", "default"] if args.aa else ["none", "same", "default"]
    if args.null:
        args.pages = args.pages or 3000
        main_null(args, keys)
    else:
        if args.baseline:
            sys.exit("--baseline goes with --null")
        args.pages = args.pages or 10_000
        main_crawl(args, keys)


if __name__ == "__main__":
    main()
