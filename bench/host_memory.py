"""What a waiting host costs the frontier: bytes of Python memory per host and frontier CPU per
robots.txt answer, at 10^5 hosts (issue 29: at 10^6 hosts the cost is per *new* host).

    .venv/bin/python bench/host_memory.py [--hosts 100000] [--rounds 3] [--baseline DIR]

One run (a child process of the tree under test, ``PYTHONPATH=<tree>``): a real ``Frontier`` on
LMDB in a temporary directory, robots.txt obeyed, ``--hosts`` hosts each given ``--urls`` URLs
(half of them held in memory, the rest spilled to LMDB: ``memory_urls`` is half the URLs), every
host's robots.txt ticket handed out (``next_ready``) and answered (``robots_done``) with a body as
the web in a box serves them (``bench/webbox/model.py``): most the same ``Disallow: /private/``,
4% with one of nine Crawl-delays, 6% a 404, 1.5% a 5xx. Then every host waits for its
politeness delay with its URLs queued and its rules known: a *waiting host*.

* **bytes per waiting host**: Python memory (``tracemalloc``, after ``gc.collect``) from before
  the first add to after the last robots.txt answer, over the hosts (a run of its own: tracing
  slows everything down);
* **CPU per robots.txt answer**: ``time.process_time`` around the ``robots_done`` calls alone
  (no tracing), over the answers; the robots.txt cache (diskcache, SQLite) included, on the
  disk of the temporary directory.

With ``--baseline DIR`` (a tree of the code, e.g. ``git worktree add --detach DIR main``) both
trees run, alternated round by round, and the ratios (this tree / baseline) of the medians are
printed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent

ALLOW = b"User-agent: *\nDisallow: /private/\n"


def answer_for(i: int) -> tuple[int, bytes]:
    """The robots.txt answer of host ``i``: the web in a box's mix (deterministic)."""
    k = (i * 2_654_435_761) % 1000
    if k < 60:
        return 404, b"not found\n"
    if k < 75:
        return 500 + 3 * (i % 2), b"error\n"
    if k < 115:
        return 200, ALLOW + b"Crawl-delay: %d\n" % (2 + i % 9)
    return 200, ALLOW


def rss_anon() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def run(hosts: int, urls: int, trace: bool) -> dict[str, float]:
    """One run in this process (see the module): its figures."""
    from frontier_crawl.frontier import Frontier
    from frontier_crawl.frontier.options import FrontierHooks, FrontierOptions
    from frontier_crawl.frontier.politeness import DelayPolicy

    with tempfile.TemporaryDirectory(prefix="host-memory-") as tmp:
        options = FrontierOptions(
            allow_domains=["test"],
            policy=DelayPolicy(min_delay_s=1.0, max_delay_s=30.0),
            obey_robots=True,
            user_agent="fc-bench/1.0",
            memory_urls=hosts * urls // 2,
            map_size=1 << 32,
        )
        f = Frontier(Path(tmp) / "state", options, FrontierHooks())
        gc.collect()
        if trace:
            tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0] if trace else 0
        rss_before = rss_anon()
        step = 10_000
        for lo in range(0, hosts, step):
            f.add(
                [f"http://h{i}.test/p{j}" for i in range(lo, min(hosts, lo + step))
                 for j in range(urls)],
                depth=0,
            )  # fmt: skip
        tickets = []
        while len(tickets) < hosts:
            got = f.next_ready(0.0, hosts)
            if not got:
                break
            tickets.extend(got)
        assert len(tickets) == hosts and all(t.robots for t in tickets), len(tickets)
        answers = [answer_for(int(t.origin[8 : t.origin.index(".")])) for t in tickets]
        cpu = time.process_time()
        done = f.robots_done
        for ticket, (status, body) in zip(tickets, answers, strict=True):
            done(ticket, 0.5, status, body, 0.01)
        cpu = time.process_time() - cpu
        del tickets, answers, ticket  # the bench's own: only the frontier's memory counts
        gc.collect()
        after = tracemalloc.get_traced_memory()[0] if trace else 0
        rss_after = rss_anon()
        if trace:
            tracemalloc.stop()
        waiting = sum(1 for host in f._hosts.values() if host.rules is not None and host.queued)
        f.close()
    out = {"hosts": hosts, "waiting_with_rules": waiting, "robots_us": cpu / hosts * 1e6}
    if trace:
        out["bytes_per_host"] = (after - before) / hosts
    else:
        out["rss_anon_per_host"] = (rss_after - rss_before) / hosts
    return out


def child(tree: Path, hosts: int, urls: int, trace: bool) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    argv = [sys.executable, __file__, "--child", "--hosts", str(hosts), "--urls", str(urls)]
    out = subprocess.run(argv + (["--trace"] if trace else []), env=env, check=True,
                         capture_output=True, text=True, cwd=tree).stdout  # fmt: skip
    return json.loads(out.splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--urls", type=int, default=2, help="URLs queued per host")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="a tree of the code to compare with")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        import frontier_crawl

        assert frontier_crawl.__file__ is not None
        assert Path(frontier_crawl.__file__).resolve().is_relative_to(Path.cwd().resolve())
        print(json.dumps(run(args.hosts, args.urls, args.trace)))
        return
    trees = {"this": HERE}
    if args.baseline:
        trees = {"baseline": Path(args.baseline).resolve(), "this": HERE}
    print(f"{args.hosts:,} hosts x {args.urls} URLs; load {os.getloadavg()}", flush=True)
    got: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    for r in range(args.rounds):
        for name, tree in trees.items():
            figures: dict[str, Any] = {}
            figures.update(child(tree, args.hosts, args.urls, trace=True))
            figures["robots_us_traced"] = figures.pop("robots_us")
            figures.update(child(tree, args.hosts, args.urls, trace=False))
            for key, value in figures.items():
                got[name].setdefault(key, []).append(float(value))
            print(f"round {r + 1} {name:8} bytes/host {figures['bytes_per_host']:7.0f}  "
                  f"RssAnon/host {figures['rss_anon_per_host']:7.0f}  "
                  f"robots us/answer {figures['robots_us']:6.1f}  "
                  f"(waiting with rules {figures['waiting_with_rules']:.0f})", flush=True)  # fmt: skip
    med = {name: {k: statistics.median(v) for k, v in d.items()} for name, d in got.items()}
    for name, m in med.items():
        print(f"median {name:8} bytes/host {m['bytes_per_host']:7.0f}  RssAnon/host "
              f"{m['rss_anon_per_host']:7.0f}  robots us/answer {m['robots_us']:6.1f}")  # fmt: skip
    if args.baseline:
        b, t = med["baseline"], med["this"]
        print(f"ratios this/baseline: bytes/host {t['bytes_per_host'] / b['bytes_per_host']:.3f}  "
              f"RssAnon/host {t['rss_anon_per_host'] / b['rss_anon_per_host']:.3f}  "
              f"robots us/answer {t['robots_us'] / b['robots_us']:.3f}")  # fmt: skip
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
