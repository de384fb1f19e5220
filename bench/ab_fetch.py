"""Before/after of the fetcher alone in one process: two trees' ``Fetcher``, each fetching the
same pages of the bench's static site from nginx on loopback in turn, round after round, in
CPU time of this process (``time.process_time``: libcurl and the fetcher's Python, nginx not
counted). The crawl benchmark's wall time swings by 30% and more on this shared machine;
alternated runs in one process share its load.

    git archive <commit> | tar -x -C DIR
    .venv/bin/python bench/ab_fetch.py --baseline DIR [--rounds 11] [--pages 5000] [--policy]

Each run: ``--pages`` URLs of the site (all its pages, host by host interleaved, repeated if
there are fewer), 64 at once, ``submit`` while a slot is free and ``poll`` for results, as
the engine does; the results are only counted. Prints CPU us per page of each tree (medians)
and the median of the per-round ratios. ``--policy``: with an address policy (loopback
allowed), as a crawl has, so each new connection's socket comes from ``OPENSOCKETFUNCTION``;
many ``--hosts`` with few pages each make most transfers open a connection.
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

from nginx_server import Nginx, ensure_nginx, free_port
from static_site import build_site, host_name, page_path

HERE = str(Path(__file__).resolve().parent.parent)


def _forget() -> dict[str, ModuleType]:
    mods = {n: sys.modules[n] for n in list(sys.modules) if n.split(".")[0] == "frontier_crawl"}
    for name in mods:
        del sys.modules[name]
    return mods


def load(
    tree: str, urls: list[str], resolve: list[str], concurrency: int, policy: bool
) -> Callable[[], float]:
    """One fetch run of ``tree``'s Fetcher over ``urls``, as a function returning CPU s/page."""
    _forget()
    sys.path.insert(0, tree)
    try:
        fetch = importlib.import_module("frontier_crawl.fetch")
        assert fetch.__file__ is not None and fetch.__file__.startswith(tree)
    finally:
        del sys.path[0]
    mods = _forget()

    def run() -> float:
        _forget()
        sys.modules.update(mods)
        addresses = fetch.AddressPolicy(["loopback"]) if policy else None
        fetcher: Any = fetch.Fetcher(
            concurrency=concurrency,
            resolve=tuple(resolve),
            capture_requests=False,
            addresses=addresses,
        )
        todo, done, ok = list(reversed(urls)), 0, 0
        cpu0 = time.process_time()
        with fetcher:
            while done < len(urls):
                while todo and fetcher.free_slots:
                    fetcher.submit(fetch.FetchRequest(todo.pop()))
                for result in fetcher.poll(1.0):
                    done += 1
                    ok += result.status == 200
        cpu = time.process_time() - cpu0
        assert ok >= len(urls) * 0.9, f"only {ok} of {len(urls)} pages answered 200"
        return cpu / len(urls)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="a tree of the code (git archive)")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--pages", type=int, default=5000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--policy", action="store_true", help="with an address policy")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fc-abfetch-") as tmp:
        work, port = Path(tmp), free_port()
        site = build_site(work / "site", port, args.hosts, min(args.pages, 10_000))
        by_host = [
            [f"http://{host_name(h)}:{port}{page_path(k)}" for k in range(n)]
            for h, n in enumerate(site.pages_per_host)
        ]
        pages = [u for k in range(max(map(len, by_host))) for urls in by_host
                 if k < len(urls) for u in urls[k : k + 1]]  # fmt: skip
        urls = (pages * (args.pages // len(pages) + 1))[: args.pages]
        resolve = [f"{host_name(h)}:{port}:127.0.0.1" for h in range(args.hosts)]
        nginx = Nginx(work, work / "site", port)
        nginx.start(ensure_nginx())
        try:
            runs = {
                "before": load(
                    str(Path(args.baseline).resolve()), urls, resolve, args.concurrency, args.policy
                ),
                "after": load(HERE, urls, resolve, args.concurrency, args.policy),
            }
            for run in runs.values():
                run()  # warm: imports done, nginx's file cache filled
            samples: dict[str, list[float]] = {name: [] for name in runs}
            for r in range(args.rounds):
                for name in list(runs) if r % 2 == 0 else list(reversed(runs)):
                    samples[name].append(runs[name]() * 1e6)
        finally:
            nginx.stop()
    b, a = samples["before"], samples["after"]
    ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
    print(f"fetcher, {args.pages} pages a run, {args.rounds} alternated rounds, CPU us/page")
    print(f"before {statistics.median(b):.1f}  {' '.join(f'{x:.1f}' for x in b)}")
    print(f"after  {statistics.median(a):.1f}  {' '.join(f'{x:.1f}' for x in a)}")
    print(f"after/before {ratio:.3f}")


if __name__ == "__main__":
    main()
