"""Before/after of ``engine_null.py`` in one process: two trees of the code, each running the
null-fetcher engine in turn, round after round, in CPU time (``time.process_time``). Separate
processes a minute apart differ by 15% or more on this shared machine; alternated runs in one
process share its load.

    git archive <commit> | tar -x -C DIR
    .venv/bin/python bench/ab_engine.py --baseline DIR [--rounds 9] [--pages 5000]

Prints CPU ms per page of each tree (medians) and the median of the per-round ratios.
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

HERE = str(Path(__file__).resolve().parent.parent)
BENCH = str(Path(__file__).resolve().parent)


def _ours(name: str) -> bool:
    return name.split(".")[0] in ("frontier_crawl", "engine_null")


def _forget() -> dict[str, ModuleType]:
    """Take the tree's modules out of sys.modules; return them."""
    mods = {name: sys.modules[name] for name in list(sys.modules) if _ours(name)}
    for name in mods:
        del sys.modules[name]
    return mods


def _install(mods: dict[str, ModuleType]) -> None:
    """Put a tree's modules back (what looks a module up by name, msgspec's type hints among
    others, then finds this tree's)."""
    _forget()
    sys.modules.update(mods)


def load(tree: str, pages: int, hosts: int) -> Callable[[], float]:
    """One engine_null run of ``tree``, as a function returning its CPU seconds."""
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

    def run() -> float:
        _install(mods)
        sys.path.insert(0, tree)  # a module the engine imports late comes from this tree too
        with tempfile.TemporaryDirectory() as tmp:
            settings = config.parse(
                {
                    "crawl": {
                        "seeds": [f"http://h{i}.bench/p/0.html" for i in range(hosts)],
                        "output_dir": str(Path(tmp) / "out"),
                        "max_depth": 1000,
                        "max_pages": pages,
                    },
                    "scope": {"allow_domains": ["bench"]},
                    "politeness": {"min_delay_s": 0.0, "obey_robots": False},
                    "fetch": {"concurrency": 64},
                    "frontier": {"seen_capacity": max(pages * 8, 1000)},
                    "output": {"warc": False, "progress_interval_s": 0.0},
                }
            )
            # the null site of engine_null's default run (20,000 pages), cut at `pages`
            fetcher = null.NullFetcher(hosts, 20_000, 20, 64)
            cpu0 = time.process_time()
            report = engine.Engine(settings, fetcher=fetcher).run()
            cpu = time.process_time() - cpu0
        sys.path.remove(tree)
        mods.update(_forget())
        return cpu / max(int(report["fetched"]), 1)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="a tree of the code (git archive)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--pages", type=int, default=5000)
    ap.add_argument("--hosts", type=int, default=50)
    args = ap.parse_args()
    runs = {
        "before": load(str(Path(args.baseline).resolve()), args.pages, args.hosts),
        "after": load(HERE, args.pages, args.hosts),
    }
    for run in runs.values():
        run()  # warm: imports done, caches of the first run not counted
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(args.rounds):
        for name in list(runs) if r % 2 == 0 else list(reversed(runs)):
            samples[name].append(runs[name]() * 1e3)
    b, a = samples["before"], samples["after"]
    ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
    print(f"engine_null, {args.pages} pages a run, {args.rounds} alternated rounds, CPU ms/page")
    print(f"before {statistics.median(b):.3f}  {' '.join(f'{x:.3f}' for x in b)}")
    print(f"after  {statistics.median(a):.3f}  {' '.join(f'{x:.3f}' for x in a)}")
    print(f"after/before {ratio:.3f}")


if __name__ == "__main__":
    main()
