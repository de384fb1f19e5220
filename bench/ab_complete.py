"""Before/after of the frontier's completion path in one process: two trees of the code, each
draining a frontier in turn, round after round (as ``ab_engine.py`` does for the engine).

A round builds a frontier of ``--urls`` URLs over ``--hosts`` hosts (no politeness delay, no
robots.txt), then drains it as the engine does: in batches, ``next_ready`` then ``complete``
(a 200) for each ticket. Timed: the ``complete`` calls alone (``perf_counter`` around each
batch's calls) and the whole drain in CPU time.

    git archive <commit> | tar -x -C DIR
    .venv/bin/python bench/ab_complete.py --baseline DIR [--rounds 9] [--urls 20000]

Prints the medians of each tree (microseconds per URL) and of the per-round ratios.
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

from ab_engine import _forget, _install

HERE = str(Path(__file__).resolve().parent.parent)


def load(tree: str, urls: int, hosts: int) -> Callable[[], tuple[float, float]]:
    """One drain of ``tree``'s frontier, as a function returning (complete s, drain CPU s)."""
    _forget()
    sys.path.insert(0, tree)
    try:
        config = importlib.import_module("frontier_crawl.config")
        frontier = importlib.import_module("frontier_crawl.frontier.frontier")
        completion = importlib.import_module("frontier_crawl.frontier.completion")
        assert config.__file__ is not None and config.__file__.startswith(tree)
    finally:
        del sys.path[0]
    mods = _forget()
    links = [f"http://h{i % hosts}.bench/p/{i}" for i in range(urls)]

    def run() -> tuple[float, float]:
        _install(mods)
        with tempfile.TemporaryDirectory() as tmp:
            settings = config.parse(
                {
                    "crawl": {"seeds": ["http://h0.bench/"], "output_dir": tmp, "max_depth": 10},
                    "scope": {"allow_domains": ["bench"]},
                    "politeness": {"min_delay_s": 0.0, "obey_robots": False},
                    "frontier": {"seen_capacity": max(urls * 2, 1000)},
                }
            )
            f = frontier.Frontier.from_settings(settings, Path(tmp) / "state")
            done = completion.Completion
            with f.batch():
                f.add(links, depth=1, now=0.0)
            spent = 0.0
            clock = time.perf_counter
            cpu0 = time.process_time()
            now = 1.0
            while f.pending:
                with f.batch():
                    tickets = f.next_ready(now, 256)
                    t0 = clock()
                    for ticket in tickets:
                        f.complete(ticket, done(now, 200))
                    spent += clock() - t0
                now += 0.001
            cpu = time.process_time() - cpu0
            f.close(checkpoint=False)
        mods.update(_forget())
        return spent, cpu

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="a tree of the code (git archive)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--urls", type=int, default=20_000)
    ap.add_argument("--hosts", type=int, default=200)
    args = ap.parse_args()
    runs = {
        "before": load(str(Path(args.baseline).resolve()), args.urls, args.hosts),
        "after": load(HERE, args.urls, args.hosts),
    }
    for run in runs.values():
        run()  # warm
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for r in range(args.rounds):
        for name in list(runs) if r % 2 == 0 else list(reversed(runs)):
            samples[name].append(runs[name]())
    per = 1e6 / args.urls
    b, a = samples["before"], samples["after"]
    print(f"{args.urls} URLs over {args.hosts} hosts, {args.rounds} alternated rounds, us/URL")
    for i, what in enumerate(("complete", "drain CPU")):
        bi, ai = [x[i] * per for x in b], [x[i] * per for x in a]
        ratio = statistics.median(y / x for x, y in zip(bi, ai, strict=True))
        print(f"{what:9}  before {statistics.median(bi):.3f}  after {statistics.median(ai):.3f}"
              f"  after/before {ratio:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
